"""Images sent to `cactus serve` (which has no vision path yet): every form of image in a chat
request is a 400 naming the problem, never a silent answer without the image, and the server keeps
serving. Local paths and file:// URLs (parsed into 'images'), Ollama's base64 'images', data: URLs
and remote URLs (refused by the messages parser) are covered."""
import json

import pytest

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def image_part(url):
    return {"role": "user", "content": [{"type": "text", "text": "Describe the image."},
                                        {"type": "image_url", "image_url": {"url": url}}]}


def post_chat(server, messages, path="/v1/chat/completions"):
    status, body, _ = server.post(path, {"model": "m", "messages": messages, "max_tokens": 2})
    return status, json.loads(body)


@pytest.mark.parametrize("url, words", [
    ("/tmp/photo.png", "does not take images"),
    ("file:///tmp/photo.png", "does not take images"),
    ("data:image/png;base64," + PNG_1PX, "only local paths"),
    ("https://example.com/cat.png", "only local paths"),
])
def test_openai_image_parts_are_clear_400s(server, url, words):
    status, body = post_chat(server, [image_part(url)])
    assert status == 400, body
    assert words in body["error"]["message"], body
    assert body["error"]["param"] == "messages"
    status, body = post_chat(server, [{"role": "user", "content": "Say hi."}])
    assert status == 200 and body["choices"][0]["message"]["content"] is not None, body


def test_ollama_images_are_a_clear_400(server):
    status, body, _ = server.post("/api/chat", {"model": "smollm2-135m", "stream": False, "messages": [
        {"role": "user", "content": "Describe the image.", "images": [PNG_1PX]}]})
    assert status == 400, body
    assert "does not take images" in body.decode(), body
