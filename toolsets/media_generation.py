"""The media_generation toolset: `image_generate` makes an image with the configured provider, saves it
as an artifact and sends it to this chat (a Telegram photo, a Slack file, a saved path on the console).
It exists only when an image provider is configured ([images] url). Each call is a paid request, so it
is audited (it appears in `anyy audit`, and `/usage` counts it). What the provider writes back (its
error text, its `revised_prompt`) is outside content: shown in its block, it taints the conversation."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from connectors.imagegen import ImageGenerator, ImageGenError
from store.artifacts import ArtifactLimit, Artifacts
from store.records import Attachment
from toolsets.base import ExecutionPolicy, Risk, ToolContext, ToolError, Toolset, configured

TOOLSET = Toolset(
    "media_generation",
    "make an image from a description and send it",
    keywords=(
        r"\b(?:generate|create|make|draw|paint|design|render|sketch)s? (?:me |us )?(?:an? |the |some |\d+ )?"
        r"(?:new |quick |simple |little |cute |nice )?(?:image|picture|pic|photo|drawing|illustration|logo|icon"
        r"|poster|artwork|painting|wallpaper|avatar|cartoon|sketch|watercolou?r|portrait|sticker)s?\b",
        r"\b(?:image|picture) generation\b", r"\bdall-?e\b",
        r"\btext[- ]to[- ]image\b",
        r"(?:画|生成|做|设计|来)(?:一|几)?(?:张|幅|个)?[^。！？\n]{0,12}(?:图|画|照片|图片|插画|头像|海报|壁纸|logo)",
    ),
    requires="images",
)

SOURCE = "image provider"  # names what the provider wrote, in its untrusted block

Size = Annotated[str, Field(pattern=r"^\d{2,5}x\d{2,5}$")]


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def image_generate(ctx: ToolContext, prompt: Annotated[str, Field(min_length=3, max_length=4000)],
                         size: Size | None = None) -> dict[str, Any]:
    """Generate an image from a description and send it to the user in this chat as a photo. Costs
    money: each call is one paid request to the image provider, so make one image per request and
    only when the user asked for one.

    Args:
        prompt: What the image shows, in detail: subject, style, colours, composition.
        size: Width x height in pixels, e.g. "1024x1024", "1536x1024"; the configured size when omitted.
    """
    generator: ImageGenerator = configured(ctx, "images", "image generation ([images] url)")
    artifacts: Artifacts = configured(ctx, "artifacts", "artifacts")
    try:
        image = await generator.generate(prompt, size)
    except ImageGenError as exc:
        raise ToolError(ctx.external(SOURCE, str(exc)) if exc.remote else str(exc)) from None
    extension = image.mime_type.split("/")[1].replace("jpeg", "jpg")
    meta = {"prompt": prompt, "generated_by": generator.model, "size": f"{image.width}x{image.height}"}
    try:
        rec = await artifacts.add_bytes(image.data, session_id=ctx.session_id, user_key=ctx.user_key,
                                        name=f"image.{extension}", mime_type=image.mime_type, meta=meta)
    except ArtifactLimit as exc:
        raise ToolError(str(exc)) from None
    attachment = Attachment(name=rec.name, mime_type=rec.type, size=rec.size, path=rec.path)
    message_id = await ctx.send("", attachment=attachment)
    out: dict[str, Any] = {"artifact": rec.id, "bytes": rec.size, "width": image.width, "height": image.height,
                           "message_id": message_id, "state": "pending"}
    if image.revised_prompt:
        out["revised_prompt"] = ctx.external(SOURCE, image.revised_prompt)
    return out
