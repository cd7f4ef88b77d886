#!/usr/bin/env python3
"""LangGraph's prebuilt ReAct agent (langgraph.prebuilt.create_react_agent) over a
scripted LangChain chat model (a GenericFakeChatModel that accepts bind_tools), traced
by OpenInference's LangChain instrumentor (openinference-instrumentation-langchain):
OpenInference attribute names (`openinference.span.kind`, `llm.input_messages.N...`,
`tool.name`, `input.value`, `output.value`), not the GenAI conventions.

Content capture is on by default in OpenInference; the nocontent case sets
OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS (and the message-level
OPENINFERENCE_HIDE_INPUT_MESSAGES / OPENINFERENCE_HIDE_OUTPUT_MESSAGES) to true.
With --instrumentation traceloop the same run is traced by OpenLLMetry's
opentelemetry-instrumentation-langchain instead (GenAI attribute names:
gen_ai.input.messages / gen_ai.output.messages; content capture: TRACELOOP_TRACE_CONTENT,
default "true"; the nocontent case sets it to "false").
See common.py for the scenario and the output.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

inst = "openinference"
if "--instrumentation" in sys.argv:
    i = sys.argv.index("--instrumentation")
    inst = sys.argv[i + 1]  # openinference | traceloop
    del sys.argv[i:i + 2]
STACK = "langgraph_" + inst
args = common.parse_args(STACK, env_switch=True)
if args.case == "nocontent":
    if inst == "openinference":
        for v in ("OPENINFERENCE_HIDE_INPUTS", "OPENINFERENCE_HIDE_OUTPUTS",
                  "OPENINFERENCE_HIDE_INPUT_MESSAGES", "OPENINFERENCE_HIDE_OUTPUT_MESSAGES"):
            common.env_flag(v, "true")
    else:
        common.env_flag("TRACELOOP_TRACE_CONTENT", "false")
tp, mem = common.provider(STACK, args.case)

if inst == "openinference":
    from openinference.instrumentation.langchain import LangChainInstrumentor
else:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor as LangChainInstrumentor
LangChainInstrumentor().instrument(tracer_provider=tp)

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
import warnings  # noqa: E402

from langgraph.prebuilt import create_react_agent  # noqa: E402

warnings.filterwarnings("ignore", message=".*create_react_agent has been moved.*")


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel answers from its script; tools are accepted and ignored."""

    def bind_tools(self, tools, **kwargs):
        return self


@tool
def fetch_document(doc_id: str) -> str:
    """Return the text of a stored document."""
    return common.fetch_document_impl(doc_id)


@tool
def pay(account: str, amount: int) -> str:
    """Pay an amount to an account."""
    return common.pay_impl(account, amount)


def call(t):
    cid, name, a = t
    return {"id": cid, "name": name, "args": a, "type": "tool_call"}




def run(case):
    pay_call = common.PAY[case]
    if case == "clean":
        script = [AIMessage(content="", tool_calls=[call(common.FETCH), call(pay_call)]),
                  AIMessage(content=common.FINAL)]
    else:
        script = [AIMessage(content="", tool_calls=[call(common.FETCH)]),
                  AIMessage(content="", tool_calls=[call(pay_call)]),
                  AIMessage(content=common.FINAL)]
    model = ScriptedChatModel(messages=iter(script))
    agent = create_react_agent(model, [fetch_document, pay], prompt=common.SYSTEM,
                               name="bookkeeper")
    agent.invoke({"messages": [("user", common.USER[case])]})
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
