"""A tiny Tk app for the computer-use tests: a button, an entry and a probe button, logging to a file.

    DISPLAY=:N python -m tests.support.tk_app LOG

Each click of the button appends "click" (a right click "right click"), Return in the entry appends
"submit:<text>" (and clears it), a wheel click "wheel up" / "wheel down", the probe button "probe". Once
the window is mapped it prints the screen centres of its widgets as one JSON line on stdout:
{"button": [x, y], "entry": [x, y], "probe": [x, y]}.
"""

from __future__ import annotations

import json
import sys
import tkinter as tk


def main(log_path: str) -> None:
    root = tk.Tk()
    root.title("anyy test app")
    root.geometry("420x180+0+0")  # no window manager on Xvfb: the window stays where it is put

    def log(line: str) -> None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    button = tk.Button(root, text="Press me", command=lambda: log("click"))
    entry = tk.Entry(root, width=30)
    probe = tk.Button(root, text="probe", command=lambda: log("probe"))

    def submit(_event: tk.Event) -> None:
        log("submit:" + entry.get())
        entry.delete(0, tk.END)

    entry.bind("<Return>", submit)
    button.bind("<Button-3>", lambda _e: log("right click"))
    for number, name in ((4, "up"), (5, "down")):  # X reports the wheel as buttons 4 and 5
        root.bind_all(f"<Button-{number}>", lambda _e, name=name: log(f"wheel {name}"))
    for widget in (button, entry, probe):
        widget.pack(padx=10, pady=10)
    root.wait_visibility(probe)
    root.update()

    def centre(w: tk.Widget) -> list[int]:
        return [w.winfo_rootx() + w.winfo_width() // 2, w.winfo_rooty() + w.winfo_height() // 2]

    print(json.dumps({"button": centre(button), "entry": centre(entry), "probe": centre(probe)}), flush=True)
    root.mainloop()


if __name__ == "__main__":
    main(sys.argv[1])
