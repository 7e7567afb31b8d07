"""Lambda's context object, as the handler is given it (the tests and the benchmarks call
the handler in-process)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that Powertools and Mangum read."""

    function_name: str = "siglip-text"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 3008
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:siglip-text"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"
    log_group_name: str = "/aws/lambda/siglip-text"
    log_stream_name: str = "2026/11/30/[$LATEST]abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000
