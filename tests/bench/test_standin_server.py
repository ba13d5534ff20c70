"""The stand-in model server stays quiet about clients that went away, and only about them."""

from __future__ import annotations

import pytest

from got_core.bench.standin import StandInOpenAIServer


@pytest.mark.parametrize("gone", [BrokenPipeError, ConnectionResetError, ConnectionAbortedError])
def test_a_client_that_went_away_prints_no_traceback(capsys, gone):
    server = StandInOpenAIServer(port=0).start()
    try:
        try:  # what socketserver does when a handler's write fails: handle_error inside the except block
            raise gone("the client closed its socket")
        except gone:
            server._httpd.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.stop()
    assert capsys.readouterr().err == ""


def test_any_other_error_in_a_handler_is_still_reported(capsys):
    server = StandInOpenAIServer(port=0).start()
    try:
        try:
            raise ValueError("a real bug in a responder")
        except ValueError:
            server._httpd.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert "ValueError: a real bug in a responder" in err
