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

The memo's cases (common.py), each in a shape LangGraph's / LangChain's / LangMem's
documentation gives (dumps only for --instrumentation openinference):
  compact_tail    create_react_agent(pre_model_hook=keep_last_tool_round): a plain
                  function (no model call) returning {"llm_input_messages": [...]}, the
                  documented key that replaces the model's input without updating the
                  state (the state keeps the full history). Once the history holds more
                  than 4 messages it returns [SystemMessage(SUMMARY), <last tool-calling
                  AI message>, <its tool results>]: before the pay request that is the
                  check_vendor call and its result. Tools fetch_document, check_vendor,
                  pay.
  compact_drop    create_react_agent(pre_model_hook=fold_after_tool_result): a plain
                  function returning the documented overwrite
                  {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]}; right
                  after the first tool result (fetch_document) `new` is
                  [SystemMessage(SUMMARY)] alone, otherwise the history unchanged.
  compact_logged  LangMem's SummarizationNode as the pre_model_hook (LangGraph's
                  documented "summarize message history" for create_react_agent:
                  state_schema with a `context` key, output_messages_key=
                  "llm_input_messages", count_tokens_approximately, max_tokens=256,
                  max_tokens_before_summary=64, max_summary_tokens=128). Its model is a
                  second ScriptedChatModel answering SUMMARY; it is called with the
                  user message, the fetch_document call and the injected result, then
                  LangMem's "Create a summary of the conversation above:". The
                  documented `final_prompt` parameter is set to "{summary}", so the next
                  request holds SystemMessage(content=response.content): SUMMARY byte
                  for byte (VERBATIM).
  compact_logged_wrapped  this stack's extra case: the same SummarizationNode with
                  LangMem's default final prompt, so the next request holds
                  SystemMessage("Summary of the conversation so far: " + SUMMARY)
                  (WRAPPED; LangGraph's own hand-written summarisation how-to wraps
                  too, f"Summary of conversation earlier: {summary}").
  memory_exact    one create_react_agent(checkpointer=InMemorySaver(),
                  store=InMemoryStore(index={"dims": 300, "embed": embed_texts,
                  "fields": ["content"]})) invoked twice, config
                  {"configurable": {"thread_id": "thread-1" | "thread-2", "user_id":
                  "user-1"}} (the documented cross-thread memory shape). Run 1's
                  `remember(text)` tool gets the store with get_store() and puts
                  {"content": text} under key MEMO_ID in ("memories", user_id),
                  returning "created memory mem-0107". Run 2's `search_memory(query)`
                  gets the store through InjectedStore() and returns the content of
                  store.search(namespace, query=query, limit=1) (MEMO as a string).
  memory_paraphrase  as memory_exact, but before run 1 the store is seeded
                  (store.put, no span) with {"content": PARAPHRASE} under PARAPHRASE_ID;
                  the search ranks PARAPHRASE first (embed_texts) and limit=1 returns it
                  alone.
LangMem's own memory tools (create_manage_memory_tool / create_search_memory_tool)
are not used: the write tool's arguments are content/action/id and it keys records by a
random uuid4 (not REMEMBER's {"text": ...} under MEMO_ID), and its search returns up
to `limit`=10 records as a JSON list. The compact_logged cases need
langmem==0.0.30 (installed with `-c` pins on langchain-core==1.8.1, langgraph==1.2.22,
langgraph-prebuilt==1.1.3, langgraph-checkpoint==4.3.2, langsmith==0.15.1; it adds
langchain==1.5.2 langchain-anthropic==1.7.10 langchain-openai==1.8.1
anthropic==2.17.0 tiktoken==0.14.0 trustcall==0.0.39 dydantic==0.0.8
docstring_parser==0.18.0, and upgrades nothing). With langchain installed, LangChain
adds "langchain": "1.5.2" to the `lc_versions` in every LLM span's `metadata`.
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
# This stack's own extra case: compact_logged with LangMem's default (wrapping) final
# prompt, beside compact_logged's verbatim one.
common.CASES.append("compact_logged_wrapped")
common.USER["compact_logged_wrapped"] = common.USER["compact_logged"]
common.PAY["compact_logged_wrapped"] = common.PAY["compact_logged"]
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
import re  # noqa: E402
import warnings  # noqa: E402
from typing import Annotated, Any  # noqa: E402

from langchain_core.messages import RemoveMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.config import get_config, get_store  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402
from langgraph.prebuilt import InjectedStore, create_react_agent  # noqa: E402
from langgraph.prebuilt.chat_agent_executor import AgentState  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

warnings.filterwarnings("ignore", message=".*create_react_agent has been moved.*")
warnings.filterwarnings("ignore", message=".*AgentState has been moved.*")


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


@tool
def check_vendor(vendor: str) -> str:
    """Look a vendor up in the vendor register."""
    return common.check_vendor_impl(vendor)


def call(t):
    cid, name, a = t
    return {"id": cid, "name": name, "args": a, "type": "tool_call"}


# --- compact_tail / compact_drop: a context manager the application wrote (no model).


def rule_based_summary(messages):
    """The application's own summary of `messages` (plain code, no model call). It
    stands for code that keeps the user's request and the document's instruction; the
    fixture's text is common.SUMMARY."""
    return common.SUMMARY


MAX_MESSAGES = 4


def keep_last_tool_round(state):
    """pre_model_hook (compact_tail): once the history holds more than MAX_MESSAGES
    messages, the model sees one summary message in place of everything before the
    last tool-calling AI message, then that message and its results. Returned under
    `llm_input_messages`: the model's input only, the state keeps the full history."""
    messages = state["messages"]
    if len(messages) <= MAX_MESSAGES:
        return {"llm_input_messages": messages}
    cut = max(i for i, m in enumerate(messages) if isinstance(m, AIMessage) and m.tool_calls)
    summary = SystemMessage(content=rule_based_summary(messages[:cut]))
    return {"llm_input_messages": [summary, *messages[cut:]]}


def fold_after_tool_result(state):
    """pre_model_hook (compact_drop): when a tool result has come in and the history
    holds no summary yet, the whole history is replaced by one summary message; the
    state's `messages` are overwritten (RemoveMessage(REMOVE_ALL_MESSAGES) first)."""
    messages = state["messages"]
    folded = any(isinstance(m, SystemMessage) for m in messages)
    if isinstance(messages[-1], ToolMessage) and not folded:
        messages = [SystemMessage(content=rule_based_summary(messages))]
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}


# --- compact_logged: LangMem's SummarizationNode as the pre_model_hook (a model call).


class SummaryState(AgentState):
    # SummarizationNode keeps its running summary here, so it does not summarise on
    # every model call (the documented state schema for create_react_agent).
    context: dict[str, Any]


# LangMem's default final prompt puts the summary in a system message as
# "Summary of the conversation so far: {summary}" (compact_logged_wrapped); the
# documented `final_prompt` parameter set to "{summary}" puts the summariser's answer
# into that system message as it is (compact_logged).
VERBATIM_FINAL_PROMPT = ChatPromptTemplate.from_messages(
    [("placeholder", "{system_message}"), ("system", "{summary}"), ("placeholder", "{messages}")]
)


def summarization_hook(wrapped):
    try:
        from langchain_core.messages.utils import count_tokens_approximately
        from langmem.short_term import SummarizationNode
    except ImportError:
        sys.exit("compact_logged needs langmem (pip install langmem==0.0.30)")
    summarizer = ScriptedChatModel(messages=iter([AIMessage(content=common.SUMMARY)]))
    extra = {} if wrapped else {"final_prompt": VERBATIM_FINAL_PROMPT}
    # Token budget: the user's message and the fetch_document call stay under it, the
    # injected tool result takes the history over it, so all three are summarised
    # (no tail); later rounds stay under it and are kept after the summary.
    return SummarizationNode(
        model=summarizer,
        token_counter=count_tokens_approximately,
        max_tokens=256,
        max_tokens_before_summary=64,
        max_summary_tokens=128,
        output_messages_key="llm_input_messages",
        **extra,
    )


# --- memory_exact / memory_paraphrase: LangGraph's BaseStore (InMemoryStore).

NAMESPACE_ROOT = "memories"
USER_ID = "user-1"
DIMS = 300


def embed_texts(texts):
    """The store's embedding function (InMemoryStore(index={"embed": ...})): a
    bag-of-words stand-in for an embedding model (offline), words with a plural "s"
    cut off, hashed into DIMS slots (no two words of the scenario share a slot). The
    query "pending payment instructions" scores 0.309 against PARAPHRASE (payment,
    instruction) and 0.183 against MEMO (instruction)."""
    import hashlib

    out = []
    for t in texts:
        v = [0.0] * DIMS
        for w in re.findall(r"[a-z0-9-]+", t.lower()):
            w = w[:-1] if w.endswith("s") and len(w) > 3 else w
            v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % DIMS] += 1.0
        out.append(v)
    return out


def namespace(config):
    return (NAMESPACE_ROOT, config["configurable"]["user_id"])


@tool
def remember(text: str) -> str:
    """Save a note to long-term memory, across conversations."""
    store = get_store()
    key = common.MEMO_ID  # the application's id for the new record
    store.put(namespace(get_config()), key, {"content": text})
    return "created memory " + key


@tool
def search_memory(query: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Search long-term memory for notes relevant to the query."""
    items = store.search(namespace(get_config()), query=query, limit=1)
    return "\n".join(item.value["content"] for item in items)


NOTED = "Noted: the payment instruction is saved."


def run_memory(case):
    store = InMemoryStore(index={"dims": DIMS, "embed": embed_texts, "fields": ["content"]})
    if case == "memory_paraphrase":
        # An earlier, unrelated session's record, written before this run's window.
        store.put((NAMESPACE_ROOT, USER_ID), common.PARAPHRASE_ID, {"content": common.PARAPHRASE})
    script = [AIMessage(content="", tool_calls=[call(common.FETCH)]),
              AIMessage(content="", tool_calls=[call(common.REMEMBER)]),
              AIMessage(content=NOTED),
              AIMessage(content="", tool_calls=[call(common.SEARCH)]),
              AIMessage(content="", tool_calls=[call(common.PAY[case])]),
              AIMessage(content=common.FINAL)]
    model = ScriptedChatModel(messages=iter(script))
    agent = create_react_agent(model, [fetch_document, remember, search_memory, pay],
                               prompt=common.SYSTEM, name="bookkeeper",
                               checkpointer=InMemorySaver(), store=store)
    agent.invoke({"messages": [("user", common.USER_MEMORY_1)]},
                 {"configurable": {"thread_id": "thread-1", "user_id": USER_ID}})
    agent.invoke({"messages": [("user", common.USER_MEMORY_2)]},
                 {"configurable": {"thread_id": "thread-2", "user_id": USER_ID}})
    common.finish(STACK, case, tp, mem, args)


def run(case):
    if case in ("memory_exact", "memory_paraphrase"):
        return run_memory(case)
    pay_call = common.PAY[case]
    if case == "clean":
        script = [AIMessage(content="", tool_calls=[call(common.FETCH), call(pay_call)]),
                  AIMessage(content=common.FINAL)]
    elif case == "compact_tail":
        script = [AIMessage(content="", tool_calls=[call(common.FETCH)]),
                  AIMessage(content="", tool_calls=[call(common.VENDOR_CALL)]),
                  AIMessage(content="", tool_calls=[call(pay_call)]),
                  AIMessage(content=common.FINAL)]
    else:
        script = [AIMessage(content="", tool_calls=[call(common.FETCH)]),
                  AIMessage(content="", tool_calls=[call(pay_call)]),
                  AIMessage(content=common.FINAL)]
    model = ScriptedChatModel(messages=iter(script))
    tools = [fetch_document, pay]
    extra = {}
    if case == "compact_tail":
        tools = [fetch_document, check_vendor, pay]
        extra = {"pre_model_hook": keep_last_tool_round}
    elif case == "compact_drop":
        extra = {"pre_model_hook": fold_after_tool_result}
    elif case in ("compact_logged", "compact_logged_wrapped"):
        extra = {"pre_model_hook": summarization_hook(case == "compact_logged_wrapped"),
                 "state_schema": SummaryState}
    agent = create_react_agent(model, tools, prompt=common.SYSTEM,
                               name="bookkeeper", **extra)
    agent.invoke({"messages": [("user", common.USER[case])]})
    common.finish(STACK, case, tp, mem, args)


for case in args.cases:
    run(case)
