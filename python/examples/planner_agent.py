"""An LLM-agent planning loop that signs every command it issues and cites the
observations it acted on, publishing through Audita's durable spool.

    python3 planner_agent.py BOOTSTRAP KEY_FILE [SPOOL_DIR]

The "LLM" here is a stand-in function (swap in a real model call): what matters is
the evidence trail. Each observation (a sensor report relayed by the fleet, an
operator's order) is recorded as a root; each decision is an `agent_text` citing the
observations in the model's context, pinned to the model id and seed so a replay can
re-run it; each robot command cites the decision it implements and commits to its
effect. A hostile reviewer can then check, from the record alone, which observation
led to which command.
"""

import sys

import audita


def llm(observations):
    """Stand-in for a model call: route around any reported human."""
    humans = [o for o in observations if "human" in o.payload.get("reading", "")]
    if humans:
        return "halt agv-7: human reported near aisle 3", audita.halt("agv-7"), audita.halted("agv-7")
    return ("send agv-7 to dock 2", audita.move_to("agv-7", 12_500, -3_000),
            audita.at_position("agv-7", 12_500, -3_000, 50))


def main():
    bootstrap, key = sys.argv[1], sys.argv[2]
    spool = sys.argv[3] if len(sys.argv) > 3 else "spool/planner"
    planner = audita.Principal.load("planner", key)
    model = audita.pins(model_id="planner-llm-8b", seed=42)
    with audita.Publisher(bootstrap, spool) as pub:
        context = [
            planner.sign("planner", audita.unix_ms(), audita.external_input("wms", "order 7: crate 7 to dock 2")),
            planner.sign("planner", audita.unix_ms(), audita.sensor_report("lidar-3", "human@1200,3400")),
        ]
        for obs in context:
            pub.publish(obs)
        thought, command, effect = llm(context)
        decision = planner.sign("dispatcher", audita.unix_ms(), audita.agent_text(thought),
                                cites=context, pins=model)
        order = planner.sign("agv-7", audita.unix_ms(), command, cites=[decision], effect=effect)
        for env in (decision, order):
            partition, offset = pub.publish(env)
            print(f"{env.id} {env.payload['kind']} -> {partition}/{offset}")


if __name__ == "__main__":
    main()
