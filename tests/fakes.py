"""Fakes shared by the tests. The fake OpenAI-compatible model server lives in
``tests.fake_model_server``; ``FakeOpenAIServer`` is its older name."""

from __future__ import annotations

from tests.fake_model_server import FakeModelServer, chat_completion, tool_call

FakeOpenAIServer = FakeModelServer

__all__ = ["FakeModelServer", "FakeOpenAIServer", "chat_completion", "tool_call"]
