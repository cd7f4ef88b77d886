#!/usr/bin/env python3
"""Strands Agents (`strands-agents`) with its own OpenTelemetry tracing (the SDK's
`strands.telemetry.tracer`, which records on the global tracer provider), an `Agent`
over `ScriptedModel`, a subclass of the SDK's `strands.models.Model` that answers each
request with the next step of a script (streamed as the SDK's Converse stream
events): no network, no weights.

Tools are plain functions decorated with `@tool`, the documented way to hand a Python
function to an agent; each run is `agent(prompt)`.

What Strands records with its default settings (no OTEL_SEMCONV_STABILITY_OPT_IN):
the messages as span *events* (`gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message` with `content` the JSON of the
message's Converse content blocks, and `gen_ai.choice` with `message`), on the `chat`
spans and on the `execute_tool` spans (arguments in `gen_ai.tool.message`, the result
blocks in `gen_ai.choice`); each `agent(...)` call is a trace of its own (an
`invoke_agent` root); a `MemoryManager`'s reads and writes are spans `memory.search`
(events `memory.query`, `memory.results`) and `memory.add` (event `memory.content`).

Content capture: on by default. The `nocontent` case turns Strands' redaction on for
every sensitive attribute: OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_unredacted_attributes=
(an empty allow-list; read when the SDK's tracer is created: nocontent runs alone).

The memo's cases, in the shapes the documentation gives:
  injected, clean, decoy  the default conversation manager, given explicitly:
                  `SlidingWindowConversationManager(window_size=40)`.
  compact_tail    `SummarizingConversationManager(summary_ratio=0.6,
                  preserve_recent_messages=2)` without a summarisation agent: on a
                  context overflow (the scripted model raises the SDK's
                  ContextWindowOverflowException on the request after the vendor check)
                  the manager has the agent's own model write the summary by calling
                  `model.stream` directly (no span: the SDK bypasses its tracing there)
                  and puts it, as a user message, in place of the oldest three messages;
                  the retried request pays.
  compact_drop    a conversation manager the application wrote (a `ConversationManager`
                  subclass, the documented extension point) whose `reduce_context`
                  replaces the whole history with SUMMARY on the overflow right after
                  the injected tool result.
  compact_logged  as compact_tail with `summarization_agent=Agent(model=summariser)`:
                  the summary is written by an agent run the SDK traces (a nested
                  `invoke_agent` with its `chat` span answering SUMMARY).
  memory_exact,   `MemoryManager(stores=[TestMemoryStore(name="notes", persist=False)],
  memory_paraphrase  add_tool_config=True, injection=False)`: its `add_memory` and
                  `search_memory` tools; two agents sharing the manager (two traces,
                  one export); run 1 stores MEMO, run 2 searches (the tool's result is
                  the JSON list of entries in one text block) and pays. In
                  memory_paraphrase the store holds PARAPHRASE, added to the store
                  directly before the run (outside the window), and run 2's search
                  (max_search_results=1) returns it only.
See common.py for the scenario and the output.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

STACK = "strands"
args = common.parse_args(STACK, env_switch=True)
if args.case == "nocontent":
    common.env_flag("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_unredacted_attributes=")
tp, mem = common.provider(STACK, args.case)

import asyncio  # noqa: E402

from strands import Agent, tool  # noqa: E402
from strands.agent.conversation_manager import (  # noqa: E402
    ConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.memory import MemoryManager  # noqa: E402
from strands.models import Model  # noqa: E402
from strands.types.exceptions import ContextWindowOverflowException  # noqa: E402
from strands.vended_memory_stores.test_memory_store import TestMemoryStore  # noqa: E402

NOTED = "Noted: the payment instruction is in memory."
OVERFLOW = "overflow"
ADD = ("call_add_1", "add_memory", {"entries": [common.MEMO]})


class ScriptedModel(Model):
    """A Model answering the n-th request with steps[n]: a list of (call id, tool,
    args) tool calls, a final text, or OVERFLOW (the request raises the SDK's
    ContextWindowOverflowException, as a provider does on a full context)."""

    def __init__(self, steps):
        self.steps = list(steps)
        self.config = {"model_id": "scripted"}

    def update_config(self, **model_config):
        self.config.update(model_config)

    def get_config(self):
        return self.config

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):
        raise NotImplementedError("the script has no structured output")
        yield  # pragma: no cover

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        step = self.steps.pop(0)
        if step == OVERFLOW:
            raise ContextWindowOverflowException("scripted: the context is full")
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, str):
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": step}}}
            yield {"contentBlockStop": {}}
            stop = "end_turn"
        else:
            for cid, name, a in step:
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": cid, "name": name}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(a)}}}}
                yield {"contentBlockStop": {}}
            stop = "tool_use"
        yield {"messageStop": {"stopReason": stop}}
        yield {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                            "metrics": {"latencyMs": 1}}}


class ReplaceWithSummary(ConversationManager):
    """The application's own manager: on an overflow the whole history becomes one
    user message holding SUMMARY (plain code, no model call, no span)."""

    def apply_management(self, agent, **kwargs):
        pass

    def reduce_context(self, agent, e=None, **kwargs):
        agent.messages[:] = [{"role": "user", "content": [{"text": common.SUMMARY}]}]


@tool
def fetch_document(doc_id: str) -> str:
    """Return the text of a stored document.

    Args:
        doc_id: The document's id.
    """
    return common.fetch_document_impl(doc_id)


@tool
def check_vendor(vendor: str) -> str:
    """Look a vendor up in the vendor register.

    Args:
        vendor: The vendor's name.
    """
    return common.check_vendor_impl(vendor)


@tool
def read_inbox(folder: str) -> str:
    """Return the unread messages of a mail folder.

    Args:
        folder: The folder's name.
    """
    return common.read_inbox_impl(folder)


@tool
def pay(account: str, amount: int) -> str:
    """Pay an amount to an account.

    Args:
        account: The account to pay.
        amount: The amount.
    """
    return common.pay_impl(account, amount)


def run(case):
    pay_call = common.PAY[case]
    tools = [fetch_document, pay]
    manager = SlidingWindowConversationManager(window_size=40)
    if case == "clean":
        script = [[common.FETCH, pay_call], common.FINAL]
    elif case == "decoy":
        tools.append(read_inbox)
        script = [[common.FETCH, common.DECOY_CALL], [pay_call], common.FINAL]
    elif case in ("compact_tail", "compact_logged"):
        tools.append(check_vendor)
        script = [[common.FETCH], [common.VENDOR_CALL], OVERFLOW]
        if case == "compact_tail":
            script.append(common.SUMMARY)  # the manager's model.stream call
            manager = SummarizingConversationManager(summary_ratio=0.6,
                                                     preserve_recent_messages=2)
        else:
            summariser = Agent(model=ScriptedModel([common.SUMMARY]), name="summariser",
                               callback_handler=None)
            manager = SummarizingConversationManager(summary_ratio=0.6,
                                                     preserve_recent_messages=2,
                                                     summarization_agent=summariser)
        script += [[pay_call], common.FINAL]
    elif case == "compact_drop":
        script = [[common.FETCH], OVERFLOW, [pay_call], common.FINAL]
        manager = ReplaceWithSummary()
    else:
        script = [[common.FETCH], [pay_call], common.FINAL]
    model = ScriptedModel(script)

    if case.startswith("memory_"):
        store = TestMemoryStore(name="notes", persist=False)
        if case == "memory_paraphrase":
            # An earlier session's note, written to the store with no span.
            asyncio.run(store.add(common.PARAPHRASE))
            search = ("call_search_1", "search_memory",
                      {"query": "standing payment instruction", "max_search_results": 1})
        else:
            search = ("call_search_1", "search_memory", {"query": "pay instruction"})
        manager_mem = MemoryManager(stores=[store], add_tool_config=True, injection=False)
        model = ScriptedModel([[common.FETCH], [ADD], NOTED,  # run 1
                               [search], [pay_call], common.FINAL])  # run 2
        for user in (common.USER_MEMORY_1, common.USER_MEMORY_2):
            agent = Agent(model=model, tools=tools, system_prompt=common.SYSTEM,
                          memory_manager=manager_mem, callback_handler=None,
                          conversation_manager=SlidingWindowConversationManager(window_size=40))
            agent(user)
    else:
        agent = Agent(model=model, tools=tools, system_prompt=common.SYSTEM,
                      conversation_manager=manager, callback_handler=None)
        agent(common.USER[case])
    assert not model.steps, "the script ran to its end"
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
