#!/usr/bin/env python3
"""AG2 (the `ag2` package, 1.x agent API) with its own OpenTelemetry tracing,
ag2.middleware.builtin.telemetry.TelemetryMiddleware (GenAI span names and attributes;
`gen_ai.input.messages` / `gen_ai.output.messages` hold OpenAI chat-format messages),
over ag2.testing.TestConfig, the library's scripted LLM (no network, no weights).

Content capture: TelemetryMiddleware(capture_content=True) (its default); the nocontent
case passes capture_content=False. Tool results longer than max_tool_result_chars
(default 8192) are cut and flagged `ag2.tool.call.result.truncated`; --truncate N sets it
(the truncated case uses 60 unless --truncate is given).
See common.py for the scenario and the output.
"""
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

limit = 8192
if "--truncate" in sys.argv:
    i = sys.argv.index("--truncate")
    limit = int(sys.argv[i + 1])
    del sys.argv[i:i + 2]
STACK = "ag2_tracing"
args = common.parse_args(STACK)
tp, mem = common.provider(STACK, args.case)

from ag2 import Agent  # noqa: E402
from ag2.events import ToolCallEvent  # noqa: E402
from ag2.middleware.builtin.telemetry import TelemetryMiddleware  # noqa: E402
from ag2.testing import TestConfig  # noqa: E402


def fetch_document(doc_id: str) -> str:
    """Return the text of a stored document."""
    return common.fetch_document_impl(doc_id)


def pay(account: str, amount: int) -> str:
    """Pay an amount to an account."""
    return common.pay_impl(account, amount)


def call(t):
    cid, name, a = t
    return ToolCallEvent(name, arguments=json.dumps(a), id=cid)




def run(case):
    cut = 60 if case == "truncated" and limit == 8192 else limit
    pay_call = common.PAY[case]
    if case == "clean":
        turns = [[call(common.FETCH), call(pay_call)], common.FINAL]
    else:
        turns = [call(common.FETCH), call(pay_call), common.FINAL]
    telemetry = TelemetryMiddleware(tracer_provider=tp, capture_content=case != "nocontent",
                                    max_tool_result_chars=cut, agent_name="bookkeeper",
                                    provider_name="test", model_name="scripted-model")
    agent = Agent("bookkeeper", prompt=common.SYSTEM, config=TestConfig(*turns),
                  tools=[fetch_document, pay], middleware=[telemetry])
    asyncio.run(agent.ask(common.USER[case]))
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
