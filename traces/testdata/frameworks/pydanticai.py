#!/usr/bin/env python3
"""Pydantic AI (pydantic-ai-slim) with its built-in OpenTelemetry GenAI instrumentation
(`agent.instrument = InstrumentationSettings(...)`) over a FunctionModel, the library's
own scripted model (pydantic_ai.models.function): each model request is answered by a
Python function from the script, no network, no weights.

Content capture: InstrumentationSettings(include_content=True) (the library's default);
the nocontent case passes include_content=False. --format-version N picks the
instrumentation data format (default 5, the library's default; 6 puts tool results in
role "tool" messages).
See common.py for the scenario and the output.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

fmt = 5
if "--format-version" in sys.argv:
    i = sys.argv.index("--format-version")
    fmt = int(sys.argv[i + 1])
    del sys.argv[i:i + 2]
STACK = "pydanticai" + ("" if fmt == 5 else "_v" + str(fmt))
args = common.parse_args(STACK)
tp, mem = common.provider(STACK, args.case)

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402



def run(case):
    pay_call = common.PAY[case]
    if case == "clean":
        script = [[common.FETCH, pay_call], common.FINAL]
    else:
        script = [[common.FETCH], [pay_call], common.FINAL]

    def scripted(messages, info: AgentInfo) -> ModelResponse:
        step = script[sum(isinstance(m, ModelResponse) for m in messages)]
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(name, a, tool_call_id=cid) for cid, name, a in step])

    settings = InstrumentationSettings(tracer_provider=tp, include_content=case != "nocontent",
                                       version=fmt)
    agent = Agent(FunctionModel(scripted, model_name="scripted-model"), name="bookkeeper",
                  instructions=common.SYSTEM)
    agent.instrument = settings

    @agent.tool_plain
    def fetch_document(doc_id: str) -> str:
        """Return the text of a stored document."""
        return common.fetch_document_impl(doc_id)

    @agent.tool_plain
    def pay(account: str, amount: int) -> str:
        """Pay an amount to an account."""
        return common.pay_impl(account, amount)

    agent.run_sync(common.USER[case])
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
