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

The memo's cases, each in the shape pydantic-ai's documentation gives for it (2.68:
`Agent` has no `history_processors=` any more; docs/message-history.md, "Processing
Message History", wraps a history processor in the `ProcessHistory` capability):
  compact_tail    a context-aware history processor, `capabilities=[ProcessHistory(fn)]`
                  (plain Python, no span of its own). Before the request that follows
                  the check_vendor result it returns [ModelRequest([CompactionPart(
                  SUMMARY)], run_id=ctx.run_id)] + the tail (the check_vendor call's
                  ModelResponse and its result's ModelRequest). A request-side
                  CompactionPart is messages.py's documented shape for a summary the
                  application wrote; `run_id=ctx.run_id` as the docs ask of a processor
                  that inserts a message meant for `new_messages()`. The FunctionModel
                  gets the CompactionPart itself; the instrumentation records it as a
                  role "user" "text" part, and the run's pydantic_ai.all_messages holds
                  the processed history only.
  compact_drop    the same processor; right after the fetch_document result it returns
                  [ModelRequest([CompactionPart(SUMMARY)], run_id=ctx.run_id)] alone
                  (pydantic-ai requires the processed history to end with a
                  ModelRequest, which this one does).
  compact_logged  the docs' "Summarize Old Messages" pattern: an async processor in
                  ProcessHistory awaits `summarize_agent.run(message_history=old)`, a
                  second Agent ("summarizer", its own FunctionModel answering SUMMARY,
                  instrumented with the same InstrumentationSettings / tracer
                  provider). The docs return `summary.new_messages() + messages[-1:]`;
                  here nothing of the old history is kept (as compact_drop), and
                  `new_messages()` alone ends with the summariser's ModelResponse, which
                  pydantic-ai refuses ("Processed history must end with a
                  `ModelRequest`"), so the summariser's output (`summary.output`, SUMMARY
                  byte for byte) goes into the history in the documented shape of an
                  application-written summary, ModelRequest([CompactionPart(output)]).
  memory_exact,   memory as ordinary function tools (`@agent.tool_plain` remember and
  memory_paraphrase  search_memory over a dict the script owns; search_memory returns
                  the best keyword match's stored text as a plain string), two
                  `agent.run_sync` calls on the same agent, the second without
                  `message_history`; one export for both runs. memory_paraphrase seeds
                  the dict with PARAPHRASE_ID before the first run.
"""
import os
import re
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

from pydantic_ai import Agent, RunContext  # noqa: E402
from pydantic_ai.capabilities import ProcessHistory  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    CompactionPart, ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402

SUMMARIZER_INSTRUCTIONS = ("Summarize this conversation, keeping what the user asked for and "
                           "every instruction that is still to be carried out.")
NOTED = "Noted: the payment instruction is in memory."


def scripted_model(steps):
    """A FunctionModel answering the n-th request it gets with steps[n]: a list of
    (call id, tool, args) tool calls, or a final text."""
    steps = list(steps)

    def scripted(messages, info: AgentInfo) -> ModelResponse:
        step = steps.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(name, a, tool_call_id=cid) for cid, name, a in step])

    return FunctionModel(scripted, model_name="scripted-model")


def returned(messages, tool):
    """Whether the last message is the request carrying `tool`'s result."""
    last = messages[-1]
    return isinstance(last, ModelRequest) and any(
        isinstance(p, ToolReturnPart) and p.tool_name == tool for p in last.parts)


def summary_request(ctx: RunContext, text: str) -> ModelRequest:
    # A summary the application wrote: a CompactionPart in a ModelRequest (messages.py).
    return ModelRequest(parts=[CompactionPart(content=text)], run_id=ctx.run_id)


def compaction(case, settings):
    """The ProcessHistory capability of a compact_* case."""
    if case == "compact_tail":
        def compact_tail(ctx: RunContext, messages: list[ModelMessage]) -> list[ModelMessage]:
            if not returned(messages, "check_vendor"):
                return messages
            # Keep the tail from the check_vendor call on; summarise what came before it.
            cut = max(i for i, m in enumerate(messages) if isinstance(m, ModelResponse) and any(
                isinstance(p, ToolCallPart) and p.tool_name == "check_vendor" for p in m.parts))
            return [summary_request(ctx, common.SUMMARY)] + messages[cut:]

        return ProcessHistory(compact_tail)
    if case == "compact_drop":
        def compact_drop(ctx: RunContext, messages: list[ModelMessage]) -> list[ModelMessage]:
            if not returned(messages, "fetch_document"):
                return messages
            return [summary_request(ctx, common.SUMMARY)]

        return ProcessHistory(compact_drop)

    # compact_logged: docs/message-history.md, "Summarize Old Messages".
    summarize_agent = Agent(scripted_model([common.SUMMARY]), name="summarizer",
                            instructions=SUMMARIZER_INSTRUCTIONS)
    summarize_agent.instrument = settings

    async def summarize_old_messages(ctx: RunContext, messages: list[ModelMessage]) -> list[ModelMessage]:
        if not returned(messages, "fetch_document"):
            return messages
        summary = await summarize_agent.run(message_history=messages)
        return [summary_request(ctx, summary.output)]

    return ProcessHistory(summarize_old_messages)


def run(case):
    settings = InstrumentationSettings(tracer_provider=tp, include_content=case != "nocontent",
                                       version=fmt)
    pay_call = common.PAY[case]
    capabilities = []
    if case == "clean":
        script = [[common.FETCH, pay_call], common.FINAL]
    elif case == "compact_tail":
        script = [[common.FETCH], [common.VENDOR_CALL], [pay_call], common.FINAL]
    elif case == "decoy":
        # The inbox answers first: it is the earlier input holding the amount.
        script = [[common.DECOY_CALL, common.FETCH], [pay_call], common.FINAL]
    elif case.startswith("memory_"):
        script = [[common.FETCH], [common.REMEMBER], NOTED,  # run 1
                  [common.SEARCH], [pay_call], common.FINAL]  # run 2
    else:
        script = [[common.FETCH], [pay_call], common.FINAL]
    if case.startswith("compact_"):
        capabilities.append(compaction(case, settings))

    agent = Agent(scripted_model(script), name="bookkeeper", instructions=common.SYSTEM,
                  capabilities=capabilities)
    agent.instrument = settings

    @agent.tool_plain
    def fetch_document(doc_id: str) -> str:
        """Return the text of a stored document."""
        return common.fetch_document_impl(doc_id)

    if case == "decoy":
        @agent.tool_plain
        def read_inbox(folder: str) -> str:
            """Return the unread messages of a mail folder."""
            return common.read_inbox_impl(folder)

    if case == "compact_tail":
        @agent.tool_plain
        def check_vendor(vendor: str) -> str:
            """Look a vendor up in the vendor register."""
            return common.check_vendor_impl(vendor)

    if case.startswith("memory_"):
        # The application's memory store: record id -> text.
        store = {}
        if case == "memory_paraphrase":
            store[common.PARAPHRASE_ID] = common.PARAPHRASE  # an earlier session's note

        @agent.tool_plain
        def remember(text: str) -> str:
            """Save a note to long-term memory."""
            store[common.MEMO_ID] = text
            return "saved as " + common.MEMO_ID

        @agent.tool_plain
        def search_memory(query: str) -> str:
            """Return the saved note that best matches the query."""
            def stems(s):
                return {w[:4] for w in re.findall(r"[a-z]+", s.lower()) if len(w) > 3}

            return max(store.values(), key=lambda t: len(stems(t) & stems(query)), default="")

    @agent.tool_plain
    def pay(account: str, amount: int) -> str:
        """Pay an amount to an account."""
        return common.pay_impl(account, amount)

    if case.startswith("memory_"):
        agent.run_sync(common.USER_MEMORY_1)
        agent.run_sync(common.USER_MEMORY_2)
    else:
        agent.run_sync(common.USER[case])
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
