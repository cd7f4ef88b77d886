#!/usr/bin/env python3
"""The older GenAI content forms, as the official OpenAI client instrumentation
(opentelemetry-instrumentation-openai-v2) still emits them by default: the OpenAI
Agents SDK's OpenAIChatCompletionsModel runs against a scripted POST /chat/completions
(an httpx.MockTransport, as in openai_agents.py), the AsyncOpenAI client is instrumented
by openai-v2, and the SDK's own agent/tool spans are bridged by
opentelemetry-instrumentation-openai-agents-v2.

On openai-v2's default (legacy, semantic conventions v1.30) path the chat span carries
no content; with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true the prompt and
completion go out as OpenTelemetry *log records* named gen_ai.system.message,
gen_ai.user.message, gen_ai.assistant.message, gen_ai.tool.message and gen_ai.choice
(bodies: {"content"}, {"tool_calls": [...]}, {"id", "content"}, {"index",
"finish_reason", "message"}), correlated with the chat span by trace and span id. They
are not in the trace export: this script writes them beside it as an OTLP/JSON
ExportLogsServiceRequest (FILE with .json replaced by .logs.json; over --endpoint the
logs are POSTed to the same base URL's /v1/logs).

With --semconv latest it sets OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental
and capture mode span_only: content on the chat span as gen_ai.input.messages /
gen_ai.output.messages instead.
Content capture off (nocontent): OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT unset
for openai-v2 and "false" for the agents instrumentation.
"""
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

semconv = "legacy"
if "--semconv" in sys.argv:
    i = sys.argv.index("--semconv")
    semconv = sys.argv[i + 1]
    del sys.argv[i:i + 2]
STACK = "openai_v2_" + ("events" if semconv == "legacy" else "latest")
args = common.parse_args(STACK)
if len(args.cases) > 1:
    sys.exit("openai_v2_events.py runs one case per process")
if args.case == "nocontent":
    os.environ.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
elif semconv == "legacy":
    common.env_flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
else:
    common.env_flag("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    common.env_flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
tp, mem = common.provider(STACK, args.case)

from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor  # noqa: E402

lp = LoggerProvider(resource=tp.resource)
logs = InMemoryLogExporter()
lp.add_log_record_processor(SimpleLogRecordProcessor(logs))

import httpx  # noqa: E402
from agents import Agent, Runner, function_tool, set_trace_processors  # noqa: E402
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402

set_trace_processors([])
OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)
OpenAIAgentsInstrumentor().instrument(
    tracer_provider=tp, capture_message_content=args.case != "nocontent")


@function_tool
def fetch_document(doc_id: str) -> str:
    """Return the text of a stored document."""
    return common.fetch_document_impl(doc_id)


@function_tool
def pay(account: str, amount: int) -> str:
    """Pay an amount to an account."""
    return common.pay_impl(account, amount)


pay_call = common.PAY[args.case]
if args.case == "clean":
    script = [[common.FETCH, pay_call], common.FINAL]
else:
    script = [[common.FETCH], [pay_call], common.FINAL]
turn = iter(range(len(script)))


def respond(request: httpx.Request) -> httpx.Response:
    assert request.url.path.endswith("/chat/completions"), request.url
    n = next(turn)
    step = script[n]
    if isinstance(step, str):
        m, fin = {"role": "assistant", "content": step}, "stop"
    else:
        m = {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
            for cid, name, a in step]}
        fin = "tool_calls"
    return httpx.Response(200, json={
        "id": "chatcmpl-" + str(n + 1), "object": "chat.completion", "created": 1767225600 + n,
        "model": "scripted-model", "choices": [{"index": 0, "message": m, "finish_reason": fin}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


client = AsyncOpenAI(api_key="offline", base_url="http://scripted.invalid/v1",
                     http_client=httpx.AsyncClient(transport=httpx.MockTransport(respond)))
agent = Agent(name="bookkeeper", instructions=common.SYSTEM, tools=[fetch_document, pay],
              model=OpenAIChatCompletionsModel(model="scripted-model", openai_client=client))
asyncio.run(Runner.run(agent, common.USER[args.case]))
lp.force_flush()
records = logs.get_finished_logs()
if args.out:
    from opentelemetry.exporter.otlp.json.common._log_encoder import encode_logs

    with open(args.out[:-len(".json")] + ".logs.json", "w", encoding="utf-8") as f:
        json.dump(json.loads(encode_logs(records).to_json()), f, indent=1, ensure_ascii=False)
        f.write("\n")
else:
    from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter

    OTLPLogExporter(endpoint=args.endpoint.replace("/v1/traces", "/v1/logs")).export(records)
common.finish(STACK, args.case, tp, mem, args)
