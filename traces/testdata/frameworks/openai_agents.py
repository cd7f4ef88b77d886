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

The memo's cases, each in the shape the SDK documents for it (the scripted model answers
each agent from its own list, chosen by the request's instructions, and checks that each
request holds, or lacks, the texts the case implies):

  compact_tail    RunConfig(call_model_input_filter=...), the documented hook that edits
                  the model input before every model call (the SDK's own
                  extensions.ToolOutputTrimmer is one): the application's CompactHistory
                  filter, once the input holds 5 items (user, fetch call, its output,
                  check_vendor call, its output), replaces all but the last 2 with one
                  {"role": "system", "content": SUMMARY} input item written by plain
                  Python (no model call, no span), and from then on sends that item plus
                  the items added since. The agent has a third function tool,
                  check_vendor. The filter is not a span; only the LLM spans' inputs show
                  the change.
  compact_drop    the same filter at 3 items with no tail: right after the fetched
                  document the input becomes the SUMMARY system item alone.
  compact_logged  the same filter as compact_drop, but the summary is the final_output of a
                  second Agent ("summariser", no tools) run with Runner.run inside the
                  filter over the replaced items; the nested run joins the current trace,
                  so its agent and LLM spans are in the same export (under the
                  bookkeeper's turn span), and its answer goes into the SUMMARY item
                  unchanged.
  memory_exact    long-term memory as function tools (@function_tool) over a store the
                  application owns (the SDK's Session classes replay one conversation's
                  history, and its sandbox Memory capability needs a sandbox with a shell
                  and writes memory with model calls of its own; neither is this shape):
                  remember(text) saves the text under MEMO_ID and answers "Saved as
                  mem-0107."; search_memory(query) returns the best note's text alone, as
                  a plain string (no record id). Two Runner.run calls without a session,
                  each its own trace, one export: run 1 (USER_MEMORY_1) fetches the
                  document and calls remember(MEMO); run 2 (USER_MEMORY_2, a fresh input)
                  calls search_memory, which returns MEMO, then pay.
  memory_paraphrase  as memory_exact, with PARAPHRASE stored under PARAPHRASE_ID before
                  run 1 (no span); the store's keyword ranking puts it first, so
                  search_memory returns PARAPHRASE only. PARAPHRASE_ID is in no span.
The dumps of these cases were made with --instrumentation openinference (both model APIs).
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
from agents import Agent, RunConfig, Runner, function_tool, set_trace_processors  # noqa: E402
from agents.run_config import ModelInputData  # noqa: E402
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


@function_tool
def check_vendor(vendor: str) -> str:
    """Look a vendor up in the vendor register."""
    return common.check_vendor_impl(vendor)


class MemoryStore:
    """The application's long-term memory: records by id, a toy keyword search (the
    number of query words whose first five letters start a word of the record; best
    record only). Owned by this script, so its content is known byte for byte."""

    def __init__(self):
        self.records = {}

    def add(self, text, record_id):
        self.records[record_id] = text
        return record_id

    def search(self, query):
        stems = [w[:5] for w in query.lower().split()]

        def score(text):
            words = [w.strip(".,:;()") for w in text.lower().split()]
            return sum(1 for st in stems if any(w.startswith(st) for w in words))

        ranked = sorted(self.records.items(), key=lambda kv: -score(kv[1]))
        return ranked[0] if ranked else None


STORE = MemoryStore()


@function_tool
def remember(text: str) -> str:
    """Save a note to long-term memory."""
    return "Saved as " + STORE.add(text, common.MEMO_ID) + "."


@function_tool
def search_memory(query: str) -> str:
    """Search long-term memory; returns the best matching note."""
    hit = STORE.search(query)
    return hit[1] if hit else "nothing found"


SUMMARISER_INSTRUCTIONS = ("Summarise the conversation so far for the assistant that "
                           "continues it. Keep every instruction, account and amount.")


class CompactHistory:
    """The application's context manager, a RunConfig.call_model_input_filter: once the
    model input holds `max_items` items it replaces all but the last `keep_last` of them
    with one system message holding a summary (written by `summarise`), once; later calls
    send that message plus the items added since."""

    def __init__(self, max_items, keep_last, summarise):
        self.max_items, self.keep_last, self.summarise = max_items, keep_last, summarise
        self.summary_item = None
        self.covered = 0  # items of the run's input the summary stands for

    async def __call__(self, data):
        items = list(data.model_data.input)
        if self.summary_item is None and len(items) >= self.max_items:
            self.covered = len(items) - self.keep_last
            self.summary_item = {"role": "system",
                                 "content": await self.summarise(items[:self.covered])}
        if self.summary_item is not None:
            items = [self.summary_item] + items[self.covered:]
        return ModelInputData(input=items, instructions=data.model_data.instructions)


async def summarise_in_code(old_items):
    """compact_tail / compact_drop: the summary written by the application's own code
    (no model call); it stands for a template or extractive summary of `old_items`."""
    return common.SUMMARY


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
NOTED = "Noted: the payment instruction is saved in memory."


def _has(req, text):
    return json.dumps(text)[1:-1] in json.dumps(req)


def scripts(case):
    """Per agent (keyed by its instructions), the model's answers in order: (answer,
    strings the request must hold, strings it must not hold). An answer is a list of
    tool calls or a final text."""
    d, s = common.DOC_TEXT, common.SUMMARY
    pay_call = common.PAY[case]
    if case == "clean":
        book = [([common.FETCH, pay_call], [common.USER[case]], []), (common.FINAL, [], [])]
    elif case == "compact_tail":
        book = [([common.FETCH], [common.USER[case]], []),
                ([common.VENDOR_CALL], [d], [s]),
                ([pay_call], [s, common.VENDOR_TEXT], [d, common.USER[case]]),
                (common.FINAL, [s, common.VENDOR_TEXT], [d])]
    elif case in ("compact_drop", "compact_logged"):
        book = [([common.FETCH], [common.USER[case]], []),
                ([pay_call], [s], [d, common.USER[case]]),
                (common.FINAL, [s], [d])]
    elif case in ("memory_exact", "memory_paraphrase"):
        found = common.MEMO if case == "memory_exact" else common.PARAPHRASE
        book = [([common.FETCH], [common.USER_MEMORY_1], []),
                ([common.REMEMBER], [d], []),
                (NOTED, [common.MEMO_ID], []),
                ([common.SEARCH], [common.USER_MEMORY_2], [d, common.USER_MEMORY_1]),
                ([pay_call], [found], [d]),
                (common.FINAL, [], [])]
    else:
        book = [([common.FETCH], [common.USER[case]], []), ([pay_call], [d], []),
                (common.FINAL, [], [])]
    out = {common.SYSTEM: book}
    if case == "compact_logged":
        out[SUMMARISER_INSTRUCTIONS] = [(s, [d], [])]
    return out


def run(case):
    lanes = {k: iter(v) for k, v in scripts(case).items()}
    count = iter(range(1000))

    def respond(request: httpx.Request) -> httpx.Response:
        req = json.loads(request.content or b"{}")
        if request.url.path.endswith("/responses"):
            instructions = req.get("instructions")
        else:
            first = (req.get("messages") or [{}])[0]
            instructions = first.get("content") if first.get("role") == "system" else None
        step, must, must_not = next(lanes[instructions])
        for t in must:
            assert _has(req, t), "request lacks " + repr(t[:60])
        for t in must_not:
            assert not _has(req, t), "request holds " + repr(t[:60])
        n = next(count)
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
    tools = [fetch_document, pay]
    run_config = None
    if case == "compact_tail":
        tools = [fetch_document, check_vendor, pay]
        # Before the pay request the input is: user, fetch call, its output, vendor call,
        # its output; everything before the vendor call is summarised.
        run_config = RunConfig(call_model_input_filter=CompactHistory(5, 2, summarise_in_code))
    elif case == "compact_drop":
        # Right after the fetched document (user, fetch call, its output) all is summarised.
        run_config = RunConfig(call_model_input_filter=CompactHistory(3, 0, summarise_in_code))
    elif case == "compact_logged":
        summariser = Agent(name="summariser", instructions=SUMMARISER_INSTRUCTIONS, model=model)

        async def summarise_with_agent(old_items):
            # A second agent run inside the filter; it joins the current trace.
            result = await Runner.run(summariser, old_items)
            return result.final_output

        run_config = RunConfig(
            call_model_input_filter=CompactHistory(3, 0, summarise_with_agent))
    elif case in ("memory_exact", "memory_paraphrase"):
        tools = [fetch_document, remember, search_memory, pay]
        STORE.records.clear()
        if case == "memory_paraphrase":
            STORE.add(common.PARAPHRASE, common.PARAPHRASE_ID)  # an earlier session's note
    agent = Agent(name="bookkeeper", instructions=common.SYSTEM, tools=tools, model=model)

    async def main():
        if case in ("memory_exact", "memory_paraphrase"):
            # Two separate runs (two traces): the second starts from a fresh input.
            await Runner.run(agent, common.USER_MEMORY_1)
            await Runner.run(agent, common.USER_MEMORY_2)
        else:
            await Runner.run(agent, common.USER[case], run_config=run_config)

    asyncio.run(main())
    for k, it in lanes.items():
        assert next(it, None) is None, "scripted answers left for " + k[:40]
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
