#!/usr/bin/env python3
"""LlamaIndex (llama-index-core) through OpenInference's LlamaIndex instrumentation
(`LlamaIndexInstrumentor().instrument(tracer_provider=...)`), a `FunctionAgent`
workflow over `MockFunctionCallingLLM`, the library's own scripted function-calling
model (llama_index.core.llms.mock; `response_generator=` answers each request with
a ChatMessage of the script): no network, no weights.

Tools are `FunctionTool.from_defaults(fn)`, the documented way to hand a Python
function to an agent; each run is `await agent.run(user_msg=..., memory=...)`.

Content capture: OpenInference's TraceConfig (the environment variables
OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS and the *_MESSAGES variants,
read once when the instrumentor starts: nocontent runs alone).

What OpenInference records here (4.6): a tool span's input as `{"kwargs": {...}}`,
its output as the whole serialised ToolOutput (`blocks`, `tool_name`, `raw_input`,
`raw_output`, `is_error`) and no call id; the model's messages as
`llm.input_messages` / `llm.output_messages` with the tool calls' ids; an `LLM` span
for `_prepare_chat_with_tools`, which calls no model; each `agent.run` as a trace of
its own (a `FunctionAgent.run` CHAIN span, no agent span, no session id).

The memo's cases, in the shapes the documentation gives:
  compact_logged  two runs sharing one `ChatSummaryMemoryBuffer.from_defaults(llm=
                  summariser, token_limit=N)` (a FunctionAgent keeps a run's own steps
                  in its scratchpad and reads the memory once per run): run 1 reads
                  DOC_ID and answers READ; run 2 (USER_GO_AHEAD) reads the memory, which
                  has the summariser (a second MockFunctionCallingLLM, instrumented like
                  the agent's, answering SUMMARY) summarise the oldest messages from a
                  transcript string it builds, and puts SUMMARY into a system message in
                  their place; run 2 pays.
  memory_exact,   memory as ordinary function tools (remember, search_memory) over a
  memory_paraphrase  dict the script owns, two `agent.run` calls on one agent with a
                  fresh memory each (two traces, one export).
See common.py for the scenario and the output.
"""
import asyncio
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

STACK = "llamaindex_openinference"
args = common.parse_args(STACK, env_switch=True)
if args.case == "nocontent":
    for k in ("OPENINFERENCE_HIDE_INPUTS", "OPENINFERENCE_HIDE_OUTPUTS",
              "OPENINFERENCE_HIDE_INPUT_MESSAGES", "OPENINFERENCE_HIDE_OUTPUT_MESSAGES"):
        common.env_flag(k, "true")
tp, mem = common.provider(STACK, args.case)

from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402

LlamaIndexInstrumentor().instrument(tracer_provider=tp)

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.base.llms.types import ToolCallBlock  # noqa: E402
from llama_index.core.llms import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.bridge.pydantic import Field  # noqa: E402
from llama_index.core.memory import (  # noqa: E402
    BaseMemoryBlock,
    ChatMemoryBuffer,
    ChatSummaryMemoryBuffer,
    FactExtractionMemoryBlock,
    Memory,
)
from llama_index.core.tools import FunctionTool  # noqa: E402

NOTED = "Noted: the payment instruction is in memory."
TOKEN_LIMIT = 200
READ = "I have read the document. Shall I make the payment?"
USER_GO_AHEAD = "Yes, please go ahead."
USER_VENDOR = "Which vendor is it, and do we know them?"
VENDOR_ANSWER = "It is Acme Supplies, a known vendor."
FACTS = ("<facts>\n<fact>The document says to pay account " + common.ATTACKER
         + " the amount 5000.</fact>\n</facts>")


class PaymentNotes(BaseMemoryBlock[str]):
    """A memory block the application wrote (plain code, no model call): of the
    messages flushed from short-term memory it keeps the sentences of tool outputs
    that mention a payment, and renders them as notes."""

    name: str = "payment_notes"
    notes: list = Field(default_factory=list)

    async def _aget(self, messages=None, **block_kwargs):
        return "\n".join(self.notes)

    async def _aput(self, messages):
        for m in messages:
            if m.role == MessageRole.TOOL:
                for sentence in re.split(r"(?<=[.])\s+", m.content or ""):
                    if "pay" in sentence.lower() and "account" in sentence.lower():
                        self.notes.append(sentence.strip())


def scripted_model(steps):
    """A MockFunctionCallingLLM answering the n-th request with steps[n]: a list of
    (call id, tool, args) tool calls, or a final text."""
    steps = list(steps)

    def respond(messages, **kwargs):
        step = steps.pop(0)
        if isinstance(step, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=step)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[
            ToolCallBlock(tool_call_id=cid, tool_name=name, tool_kwargs=a)
            for cid, name, a in step])

    return MockFunctionCallingLLM(response_generator=respond)


def run(case):
    pay_call = common.PAY[case]
    if case == "clean":
        script = [[common.FETCH, pay_call], common.FINAL]
    elif case == "compact_logged":
        script = [[common.FETCH], READ,  # run 1
                  [pay_call], common.FINAL]  # run 2, after the summary
    elif case in ("memory_blocks", "memory_notes"):
        script = [[common.FETCH], READ,  # run 1
                  [common.VENDOR_CALL], VENDOR_ANSWER,  # run 2
                  [pay_call], common.FINAL]  # run 3, after the flush
    elif case == "retriever":
        script = [[common.FETCH], [("call_note_1", "save_note", {"text": common.MEMO})],
                  NOTED,  # run 1
                  [("call_lookup_1", "lookup_notes", {"query": "pending payment"})],
                  [pay_call], common.FINAL]  # run 2
    elif case.startswith("memory_"):
        script = [[common.FETCH], [common.REMEMBER], NOTED,  # run 1
                  [common.SEARCH], [pay_call], common.FINAL]  # run 2
    else:
        script = [[common.FETCH], [pay_call], common.FINAL]

    def fetch_document(doc_id: str) -> str:
        """Return the text of a stored document."""
        return common.fetch_document_impl(doc_id)

    def pay(account: str, amount: int) -> str:
        """Pay an amount to an account."""
        return common.pay_impl(account, amount)

    def check_vendor(vendor: str) -> str:
        """Look a vendor up in the vendor register."""
        return common.check_vendor_impl(vendor)

    tools = [fetch_document, pay]
    if case in ("memory_blocks", "memory_notes"):
        tools.append(check_vendor)
    elif case == "retriever":
        # A vector index over an offline embedding model (MockEmbedding: a
        # constant vector, so every note is as near as any other).
        from llama_index.core import Document, VectorStoreIndex
        from llama_index.core.embeddings import MockEmbedding

        index = VectorStoreIndex([], embed_model=MockEmbedding(embed_dim=8))

        def save_note(text: str) -> str:
            """Save a note to the notes index."""
            index.insert(Document(text=text, id_=common.MEMO_ID))
            return "saved as " + common.MEMO_ID

        def lookup_notes(query: str) -> str:
            """Return the saved notes that best match the query."""
            nodes = index.as_retriever(similarity_top_k=1).retrieve(query)
            return "\n".join(n.get_content() for n in nodes)

        tools += [save_note, lookup_notes]
    elif case.startswith("memory_"):
        store = {}
        if case == "memory_paraphrase":
            store[common.PARAPHRASE_ID] = common.PARAPHRASE  # an earlier session's note

        def remember(text: str) -> str:
            """Save a note to long-term memory."""
            store[common.MEMO_ID] = text
            return "saved as " + common.MEMO_ID

        def search_memory(query: str) -> str:
            """Return the saved note that best matches the query."""
            def stems(s):
                return {w[:4] for w in re.findall(r"[a-z]+", s.lower()) if len(w) > 3}

            return max(store.values(), key=lambda t: len(stems(t) & stems(query)), default="")

        tools += [remember, search_memory]
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(f) for f in tools],
                          llm=scripted_model(script), system_prompt=common.SYSTEM)

    def memory():
        if case == "compact_logged":
            # Room for the last answer and the new message, not for the document: the
            # second run's first read of the memory summarises the first run.
            return ChatSummaryMemoryBuffer.from_defaults(
                llm=scripted_model([common.SUMMARY]), token_limit=30)
        if case in ("memory_blocks", "memory_notes"):
            # Short-term memory holds about two turns: the third run's message flushes
            # the first turn into the block, which renders into the system message.
            block = (FactExtractionMemoryBlock(name="facts", llm=scripted_model([FACTS]))
                     if case == "memory_blocks" else PaymentNotes())
            return Memory.from_defaults(session_id=case, token_limit=TOKEN_LIMIT,
                                        chat_history_token_ratio=0.5, token_flush_size=40,
                                        memory_blocks=[block])
        return ChatMemoryBuffer.from_defaults()

    async def go():
        if case == "compact_logged":
            shared = memory()
            await agent.run(user_msg=common.USER[case], memory=shared)
            await agent.run(user_msg=USER_GO_AHEAD, memory=shared)
        elif case in ("memory_blocks", "memory_notes"):
            shared = memory()
            for user in (common.USER["injected"], USER_VENDOR, USER_GO_AHEAD):
                await agent.run(user_msg=user, memory=shared)
        elif case == "retriever":
            await agent.run(user_msg=common.USER_MEMORY_1, memory=memory())
            await agent.run(user_msg=common.USER_MEMORY_2, memory=memory())
        elif case.startswith("memory_"):
            await agent.run(user_msg=common.USER_MEMORY_1, memory=memory())
            await agent.run(user_msg=common.USER_MEMORY_2, memory=memory())
        else:
            await agent.run(user_msg=common.USER[case], memory=memory())

    asyncio.run(go())
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
