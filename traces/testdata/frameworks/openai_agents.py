#!/usr/bin/env python3
"""The OpenAI Agents SDK (openai-agents) running its default model class,
OpenAIResponsesModel, against a scripted Responses API: the AsyncOpenAI client is given
an httpx.MockTransport that answers POST /responses from a script (no network, no
key, no weights); with --model-api chat it runs OpenAIChatCompletionsModel against a
scripted POST /chat/completions instead. The SDK's own tracing is bridged to OpenTelemetry by one of two
instrumentations, chosen with --instrumentation:

  otel          opentelemetry-instrumentation-openai-agents-v2 (OpenTelemetry contrib,
                GenAI conventions: gen_ai.input.messages / gen_ai.output.messages,
                execute_tool spans with gen_ai.tool.call.*). Content capture:
                OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT (this version captures
                when it is unset; the nocontent case sets it to "false").
  openinference openinference-instrumentation-openai-agents (OpenInference names).
                Content capture on by default; nocontent sets OPENINFERENCE_HIDE_INPUTS,
                OPENINFERENCE_HIDE_OUTPUTS, OPENINFERENCE_HIDE_INPUT_MESSAGES and
                OPENINFERENCE_HIDE_OUTPUT_MESSAGES to "true".

The SDK's default trace processor (which uploads to the vendor) is removed first.
See common.py for the scenario and the output.
"""
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402



def _take(flag, default):
    if flag in sys.argv:
        i = sys.argv.index(flag)
        v = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        return v
    return default


inst = _take("--instrumentation", "otel")  # otel | openinference
api = _take("--model-api", "responses")  # responses | chat
STACK = "openai_agents_" + inst + ("" if api == "responses" else "_chatcmpl")
args = common.parse_args(STACK, env_switch=True)
if args.case == "nocontent":
    if inst == "otel":
        common.env_flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    else:
        for v in ("OPENINFERENCE_HIDE_INPUTS", "OPENINFERENCE_HIDE_OUTPUTS",
                  "OPENINFERENCE_HIDE_INPUT_MESSAGES", "OPENINFERENCE_HIDE_OUTPUT_MESSAGES"):
            common.env_flag(v, "true")
tp, mem = common.provider(STACK, args.case)

import httpx  # noqa: E402
from agents import Agent, Runner, function_tool, set_trace_processors  # noqa: E402
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

set_trace_processors([])  # no upload to the vendor's trace backend
if inst == "otel":
    from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
else:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)


@function_tool
def fetch_document(doc_id: str) -> str:
    """Return the text of a stored document."""
    return common.fetch_document_impl(doc_id)


@function_tool
def pay(account: str, amount: int) -> str:
    """Pay an amount to an account."""
    return common.pay_impl(account, amount)


def fc(t):
    cid, name, a = t
    return {"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": name,
            "arguments": json.dumps(a), "status": "completed"}


def msg(text):
    return {"type": "message", "id": "msg_final", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


USAGE_R = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
           "input_tokens_details": {"cached_tokens": 0},
           "output_tokens_details": {"reasoning_tokens": 0}}
USAGE_C = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def run(case):
    pay_call = common.PAY[case]
    if case == "clean":
        script = [[common.FETCH, pay_call], common.FINAL]
    else:
        script = [[common.FETCH], [pay_call], common.FINAL]
    turn = iter(range(len(script)))

    def respond(request: httpx.Request) -> httpx.Response:
        n = next(turn)
        step = script[n]
        req = json.loads(request.content or b"{}")
        if request.url.path.endswith("/responses"):
            out = [msg(step)] if isinstance(step, str) else [fc(t) for t in step]
            # As the service does, the response echoes the request's instructions and tools.
            body = {"id": "resp_" + str(n + 1), "object": "response", "created_at": 1767225600 + n,
                    "model": "scripted-model", "status": "completed", "output": out,
                    "instructions": req.get("instructions"), "tools": req.get("tools", []),
                    "parallel_tool_calls": True, "tool_choice": "auto", "usage": USAGE_R}
        elif request.url.path.endswith("/chat/completions"):
            if isinstance(step, str):
                m, fin = {"role": "assistant", "content": step}, "stop"
            else:
                m = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": name, "arguments": json.dumps(a)}}
                    for cid, name, a in step]}
                fin = "tool_calls"
            body = {"id": "chatcmpl-" + str(n + 1), "object": "chat.completion",
                    "created": 1767225600 + n, "model": "scripted-model",
                    "choices": [{"index": 0, "message": m, "finish_reason": fin}],
                    "usage": USAGE_C}
        else:
            raise AssertionError("unexpected request " + str(request.url))
        return httpx.Response(200, json=body)

    client = AsyncOpenAI(api_key="offline", base_url="http://scripted.invalid/v1",
                         http_client=httpx.AsyncClient(transport=httpx.MockTransport(respond)))
    model = (OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel)(
        model="scripted-model", openai_client=client)
    agent = Agent(name="bookkeeper", instructions=common.SYSTEM, tools=[fetch_document, pay],
                  model=model)
    asyncio.run(Runner.run(agent, common.USER[case]))
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
