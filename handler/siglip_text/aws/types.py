"""The shapes Lambda hands the function and takes back: its context object, the proxy events
of API Gateway (REST v1, HTTP API v2) and function URLs, and the proxy response.

Written as Mangum's ``mangum/types.py`` writes them (a `Protocol` for the context,
`TypedDict`s for the payloads); the fields are those of AWS's documented payloads, not all
of them read here (docs/architecture.md names who reads what).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, Protocol, TypedDict

from ..engine.json_value import JSONValue


class LambdaContext(Protocol):
    """Lambda's context object, as far as Powertools, Mangum and this package read it
    (https://docs.aws.amazon.com/lambda/latest/dg/python-context.html)."""

    function_name: str
    aws_request_id: str

    def get_remaining_time_in_millis(self) -> int: ...


class RestRequestContext(TypedDict, total=False):
    """``requestContext`` of a REST API proxy event."""

    resourcePath: str
    httpMethod: str
    path: str
    stage: str
    requestId: str
    identity: dict[str, str]


class RestApiEvent(TypedDict, total=False):
    """An API Gateway REST API (payload format 1.0) proxy event
    (https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html)."""

    resource: str
    path: str
    httpMethod: str
    headers: dict[str, str] | None
    multiValueHeaders: dict[str, list[str]] | None
    queryStringParameters: dict[str, str] | None
    multiValueQueryStringParameters: dict[str, list[str]] | None
    pathParameters: dict[str, str] | None
    stageVariables: dict[str, str] | None
    requestContext: RestRequestContext
    body: str | None
    isBase64Encoded: bool


class HttpRequestContext(TypedDict, total=False):
    """``requestContext.http`` of a payload format 2.0 event."""

    method: str
    path: str
    protocol: str
    sourceIp: str
    userAgent: str


class HttpApiRequestContext(TypedDict, total=False):
    """``requestContext`` of a payload format 2.0 event."""

    accountId: str
    apiId: str
    domainName: str
    domainPrefix: str
    http: HttpRequestContext
    requestId: str
    routeKey: str
    stage: str
    time: str
    timeEpoch: int


class HttpApiEvent(TypedDict, total=False):
    """An API Gateway HTTP API event, payload format 2.0
    (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html)."""

    version: Literal["2.0"]
    routeKey: str
    rawPath: str
    rawQueryString: str
    cookies: list[str]
    headers: dict[str, str]
    queryStringParameters: dict[str, str]
    requestContext: HttpApiRequestContext
    body: str
    isBase64Encoded: bool


#: A function URL event has the HTTP API's payload format 2.0, ``routeKey`` ``$default``
#: (https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html#urls-payloads).
FunctionUrlEvent = HttpApiEvent

#: What the handler is given: any JSON object an invoker sends, not one of the shapes above
#: until it is checked (events.as_mangum_reads), before Mangum reads it.
LambdaEvent = Mapping[str, JSONValue]


class ProxyResponse(TypedDict, total=False):
    """The proxy response API Gateway and function URLs relay (payload format 1.0's fields;
    2.0 takes the same ones)."""

    statusCode: int
    headers: dict[str, str]
    multiValueHeaders: dict[str, list[str]]
    body: str
    isBase64Encoded: bool


#: The function's handler, and Mangum's: an event and the context in, the response out.
Handler = Callable[[LambdaEvent, LambdaContext], ProxyResponse]
