"""The desktop driver for computer use: one X display, its screen, its mouse and keyboard.

Knows nothing of tools or chats. The display is the one named in the settings, never `$DISPLAY`.

- **Display.** With `xvfb=True` the driver starts its own Xvfb on that display at the configured size
  (`-displayfd` says when it accepts connections, so nothing sleeps) and stops it in `aclose()`; the
  child is tied to this process (PR_SET_PDEATHSIG), so a `kill -9` of Anyy leaves no display behind.
  With `xvfb=False` an existing display is used (a desktop session, a VNC server) and left running.
- **Input: xdotool**, one short child process per action, with the display in its environment. Chosen
  over XTEST through python-xlib because typing arbitrary text is the hard part of synthetic input:
  xdotool maps every character to a keysym and, for one the keyboard map lacks, remaps a spare keycode
  for it, and its key names (`Return`, `ctrl+a`) are the ones models already use. A child process per
  action costs a few milliseconds next to seconds of model time.
- **Screenshots: mss** (maintained, no X toolkit; XShmGetImage with an XGetImage fallback), PNG-encoded
  and, for a screen larger than the size the model is shown, scaled down by Pillow. Both run in a
  worker thread: the event loop never waits on the X server.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
import logging
import os
import shutil
import signal
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

Button = Literal["left", "right", "middle"]
Direction = Literal["up", "down", "left", "right"]
_BUTTONS = {"left": "1", "middle": "2", "right": "3"}
_WHEEL = {"up": "4", "down": "5", "left": "6", "right": "7"}  # X's scroll "buttons"
_TYPE_DELAY_MS = "12"  # between keystrokes: fast, and slow enough for toolkits that drop bursts
_PR_SET_PDEATHSIG = 1


class DesktopError(Exception):
    """The display cannot be reached or an input program failed; the message says which and why."""


@dataclass(frozen=True)
class DesktopSettings:
    display: str  # ":99"
    xvfb: bool  # start (and stop) an Xvfb on `display`
    width: int = 1280  # the Xvfb screen size (ignored for an existing display)
    height: int = 800
    timeout_s: float = 15.0  # Xvfb start-up, one input program


@dataclass(frozen=True)
class Shot:
    """A screenshot: PNG bytes of `width`x`height` pixels; `scale` = shown size / screen size (<= 1)."""

    png: bytes
    width: int
    height: int
    scale: float


def fit_scale(width: int, height: int, max_width: int, max_height: int) -> float:
    """The factor that fits a screen into max_width x max_height (1.0 when it already fits)."""
    return min(1.0, max_width / width, max_height / height)


def missing_programs(xvfb: bool) -> list[str]:
    """The programs these settings need that are not on PATH (Debian: apt-get install xdotool xvfb)."""
    needed = ["xdotool", *(["Xvfb"] if xvfb else [])]
    return [p for p in needed if shutil.which(p) is None]


def _die_with_parent() -> None:  # runs in the forked child, before exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Desktop:
    """One X display: start/stop (for Xvfb), read the screen and the pointer, send input."""

    def __init__(self, settings: DesktopSettings) -> None:
        self.settings = settings
        self.display = settings.display
        self._xvfb: asyncio.subprocess.Process | None = None
        self._env = {**os.environ, "DISPLAY": settings.display}

    @property
    def owns_display(self) -> bool:
        """Whether this driver started the display (and will stop it)."""
        return self._xvfb is not None

    async def start(self, *, start_xvfb: bool = True) -> tuple[int, int]:
        """Bring the display up (Xvfb when configured and `start_xvfb`) and check that it answers;
        returns its size. Raises DesktopError naming what is missing or wrong."""
        missing = missing_programs(self.settings.xvfb and start_xvfb)
        if missing:
            packages = " ".join(m.lower() for m in missing)
            raise DesktopError(f"{' and '.join(missing)} not found: apt-get install {packages}")
        if self.settings.xvfb and start_xvfb:
            if await self._answers():
                raise DesktopError(f"display {self.display} is already served by another X server: set xvfb = "
                                   "false to use it, or choose a free display")
            await self._start_xvfb()
        try:
            return await self.size()
        except DesktopError:
            await self.aclose()
            raise

    async def _answers(self) -> bool:
        try:
            await self.size()
        except DesktopError:
            return False
        return True

    async def _start_xvfb(self) -> None:
        s = self.settings
        read_fd, write_fd = os.pipe()
        try:
            self._xvfb = await asyncio.create_subprocess_exec(
                "Xvfb", s.display, "-screen", "0", f"{s.width}x{s.height}x24", "-nolisten", "tcp",
                # -noreset: by default Xvfb resets when its last client leaves, refusing connections meanwhile.
                "-noreset", "-displayfd", str(write_fd), pass_fds=(write_fd,), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, preexec_fn=_die_with_parent)
        finally:
            os.close(write_fd)
        try:
            # Xvfb writes the display number once it accepts connections, or exits (display taken, ...).
            ready = await asyncio.wait_for(asyncio.to_thread(_read_line, read_fd), s.timeout_s)
        except TimeoutError:
            ready = ""
        finally:
            os.close(read_fd)
        if not ready:
            why = await self._xvfb_failure()
            raise DesktopError(f"Xvfb did not start on {s.display}: {why}")
        log.info("xvfb_started display=%s size=%dx%d pid=%d", s.display, s.width, s.height, self._xvfb.pid)

    async def _xvfb_failure(self) -> str:
        proc, self._xvfb = self._xvfb, None
        assert proc is not None
        if proc.returncode is None:
            proc.kill()
        _, err = await proc.communicate()
        # Xvfb's complaint is the first line after its "(EE) Fatal server error:" banner.
        lines = [line.removeprefix("(EE)").strip() for line in err.decode(errors="replace").splitlines()]
        said = [line for line in lines if line and line != "Fatal server error:"]
        return (said or [f"it exited with code {proc.returncode}"])[0][:300]

    async def aclose(self) -> None:
        """Stop the Xvfb this driver started (an existing display is left alone). Idempotent."""
        proc, self._xvfb = self._xvfb, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), self.settings.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        log.info("xvfb_stopped display=%s", self.display)

    # -- reading ------------------------------------------------------------------------------------

    async def size(self) -> tuple[int, int]:
        """(width, height) of the screen in pixels."""
        out = await self._xdotool("getdisplaygeometry")
        try:
            width, height = (int(v) for v in out.split())
        except ValueError:
            raise DesktopError(f"unexpected answer from xdotool getdisplaygeometry: {out[:80]!r}") from None
        return width, height

    async def cursor(self) -> tuple[int, int]:
        """The pointer's position in screen pixels."""
        out = await self._xdotool("getmouselocation", "--shell")
        fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            return int(fields["X"]), int(fields["Y"])
        except (KeyError, ValueError):
            raise DesktopError(f"unexpected answer from xdotool getmouselocation: {out[:80]!r}") from None

    async def screenshot(self, max_width: int, max_height: int) -> Shot:
        """The whole screen as PNG, scaled down to fit max_width x max_height when it is larger."""
        return await asyncio.to_thread(self._grab, max_width, max_height)

    def _grab(self, max_width: int, max_height: int) -> Shot:
        import mss  # imported where used: a runtime without computer use never loads it
        import mss.tools

        try:
            with mss.MSS(display=self.display) as grabber:
                raw = grabber.grab(grabber.monitors[0])
        except mss.ScreenShotError as exc:
            raise DesktopError(f"cannot read the screen of {self.display}: {exc}") from None
        width, height = raw.size
        scale = fit_scale(width, height, max_width, max_height)
        if scale == 1.0:
            return Shot(mss.tools.to_png(raw.rgb, raw.size, level=6) or b"", width, height, 1.0)
        from PIL import Image

        shown = (max(1, round(width * scale)), max(1, round(height * scale)))
        img = Image.frombytes("RGB", raw.size, raw.rgb).resize(shown, Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        img.save(buf, "PNG", optimize=True)  # PNG even scaled: text on screen must stay legible
        return Shot(buf.getvalue(), shown[0], shown[1], scale)

    # -- input --------------------------------------------------------------------------------------

    # No `mousemove --sync`: it waits for a motion event that never comes when the pointer is already
    # there. A move and a click from one xdotool run reach the server in order anyway (one connection).
    async def move(self, x: int, y: int) -> None:
        await self._xdotool("mousemove", str(x), str(y))

    async def click(self, x: int, y: int, button: Button = "left", count: int = 1) -> None:
        """Move to (x, y) and click `count` times (2: a double click)."""
        # xdotool sleeps `--delay` (default 100 ms) after every click, the last one too.
        delay = "80" if count > 1 else "0"
        await self._xdotool("mousemove", str(x), str(y), "click", "--repeat", str(count), "--delay", delay,
                            _BUTTONS[button])

    async def type(self, text: str) -> None:
        """Type `text` as keystrokes into whatever has the keyboard focus (newline = Return)."""
        seconds = self.settings.timeout_s + len(text) * 0.05  # a long text takes its keystrokes' time
        await self._xdotool("type", "--delay", _TYPE_DELAY_MS, "--", text, timeout_s=seconds)

    async def key(self, keys: str) -> None:
        """Press keys by xdotool name: "Return", "ctrl+a", several separated by spaces."""
        await self._xdotool("key", "--delay", _TYPE_DELAY_MS, "--", *keys.split())

    async def scroll(self, direction: Direction, amount: int, at: tuple[int, int] | None = None) -> None:
        """Turn the wheel `amount` clicks, at (x, y) when given, else where the pointer is."""
        move = ["mousemove", str(at[0]), str(at[1])] if at is not None else []
        await self._xdotool(*move, "click", "--repeat", str(amount), "--delay", "40", _WHEEL[direction])

    async def _xdotool(self, *args: str, timeout_s: float | None = None) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                "xdotool", *args, env=self._env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            raise DesktopError("xdotool not found: apt-get install xdotool") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s or self.settings.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise DesktopError(f"xdotool {args[0]} did not finish in time; it was stopped") from None
        problem = err.decode(errors="replace").strip()
        # xdotool says "No such key name" and carries on with exit code 0: that is still a failed action.
        if "Can't open display" in problem:
            raise DesktopError(f"cannot open the X display {self.display} (is it running, and may this user use it?)")
        if proc.returncode != 0 or "No such key name" in problem:
            first = problem.splitlines()[0] if problem else f"exit code {proc.returncode}"
            raise DesktopError(f"xdotool {args[0]} on {self.display} failed: {first[:200]}")
        return out.decode(errors="replace").strip()


def _read_line(fd: int) -> str:
    """Bytes from `fd` up to a newline or end of file (blocking: run in a thread)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()
