// A VDA 5050 fleet driven by a third-party implementation (vda-5050-lib 1.4.0 from the
// npm registry: its MasterController, AgvController and VirtualAgvAdapter, which
// simulates vehicle motion), for cli/tests/it/vda5050_incident.rs. Nothing here knows
// about Audita: the fleet talks VDA 5050 2.0.0 over MQTT under its own interface name,
// and the bridge sidecars record it.
//
// The site: a human aisle spans x in [2, 6] m of hall-1 across every lane, and the
// site's rule is 1 m/s inside it. Each vehicle has its own lane (y = 2 m apart) and
// drives from x = 0 to x = 8 m through the aisle, on an order of an ordinary shape:
//   s1 "lastdrop"   one edge released at 2.0 m/s, a `drop` at its last node only
//                   (the ordinary transport order);
//   s2 "noactions"  one edge released at 2.0 m/s, no actions at all;
//   s3 "compliant"  one edge released at 1.0 m/s (no incident);
//   s4 "reroute"    A-B (1 m) released at 1.0 m/s, the rest a horizon; an order update
//                   stitches at B and releases B-D through the aisle at 2.0 m/s;
//   s5 "nolimit"    one edge with no maxSpeed (master control sets no limit);
//   s6 "selfspeed"  one edge released at 1.0 m/s, but the vehicle ignores it and
//                   drives 2.0 m/s (the adapter's vehicleSpeedDistribution);
//   s7 "cancel"     one edge released at 2.0 m/s, cancelled by a `cancelOrder`
//                   instant action before the vehicle reaches the aisle (no incident).
//
// Usage: node fleet.js MQTT_PORT INTERFACE [SHAPE[=SERIAL]...]   (default: every shape;
// a vehicle's serial number is s1..s7 by lane unless SERIAL names it, as the README's
// walkthrough does with heldout/001)
// Prints one JSON line per event of the library's own view (order processed, node
// traversed, edge traversing, cancel state), then `{"done": true, ...}`; exit 0 when
// every order ended as its shape expects, 1 otherwise (message on stderr).

"use strict";

const { AgvController, MasterController, VirtualAgvAdapter } = require("vda-5050-lib");

const port = Number(process.argv[2]);
const interfaceName = process.argv[3];
if (!Number.isInteger(port) || port <= 0 || !interfaceName) {
    console.error("usage: node fleet.js MQTT_PORT INTERFACE [SHAPE...]");
    process.exit(2);
}
const MAP = "hall-1";
const MANUFACTURER = "heldout";
const clientOptions = {
    interfaceName,
    transport: { brokerUrl: `mqtt://127.0.0.1:${port}` },
    vdaVersion: "2.0.0",
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const SHAPES = ["lastdrop", "noactions", "compliant", "reroute", "nolimit", "selfspeed", "cancel"];
const wanted = (process.argv.length > 4 ? process.argv.slice(4) : SHAPES).map((w) => {
    const [shape, serial] = w.split("=");
    if (!SHAPES.includes(shape)) {
        console.error(`unknown shape ${shape}; one of ${SHAPES.join(", ")}`);
        process.exit(2);
    }
    return { shape, serial };
});

function node(id, seq, x, y, actions = [], released = true) {
    return { nodeId: id, sequenceId: seq, released, nodePosition: { x, y, mapId: MAP }, actions };
}

function edge(id, seq, start, end, maxSpeed, released = true) {
    const e = { edgeId: id, sequenceId: seq, startNodeId: start, endNodeId: end, released, actions: [] };
    if (maxSpeed !== undefined) {
        e.maxSpeed = maxSpeed;
    }
    return e;
}

function drop(serial) {
    return {
        actionId: `${serial}-drop`,
        actionType: "drop",
        blockingType: "HARD",
        actionParameters: [
            { key: "stationType", value: "floor" },
            { key: "loadType", value: "EPAL" },
            { key: "duration", value: 0.5 },
        ],
    };
}

// One vehicle per shape, lane y = 2 * index.
function plan(shape, index, serialNumber) {
    const serial = serialNumber || `s${index + 1}`;
    const y = 2 * index;
    const p = (id) => `${serial}-${id}`;
    const through = (maxSpeed, actions = []) => ({
        nodes: [node(p("A"), 0, 0, y), node(p("B"), 2, 8, y, actions)],
        edges: [edge(p("A-B"), 1, p("A"), p("B"), maxSpeed)],
    });
    const v = { shape, serial, y, adapter: {} };
    switch (shape) {
        case "lastdrop":
            v.order = through(2.0, [drop(serial)]);
            break;
        case "noactions":
            v.order = through(2.0);
            break;
        case "compliant":
            v.order = through(1.0);
            break;
        case "nolimit":
            v.order = through(undefined);
            break;
        case "selfspeed":
            v.order = through(1.0);
            v.adapter.vehicleSpeedDistribution = () => [2, 2];
            break;
        case "cancel":
            v.order = through(2.0);
            v.cancelAfterMs = 300;
            break;
        case "reroute":
            v.order = {
                nodes: [node(p("A"), 0, 0, y), node(p("B"), 2, 1, y), node(p("C"), 4, 8, y, [], false)],
                edges: [edge(p("A-B"), 1, p("A"), p("B"), 1.0), edge(p("B-C"), 3, p("B"), p("C"), 1.0, false)],
            };
            v.update = {
                afterMs: 300,
                nodes: [node(p("B"), 2, 1, y), node(p("D"), 4, 8, y)],
                edges: [edge(p("B-D"), 3, p("B"), p("D"), 2.0)],
            };
            break;
        default:
            throw new Error(`unknown shape ${shape}`);
    }
    return v;
}

function emit(line) {
    console.log(JSON.stringify(line));
}

async function main() {
    const fleet = wanted.map((w) => plan(w.shape, SHAPES.indexOf(w.shape), w.serial));
    const agvs = fleet.map(
        (v) =>
            new AgvController(
                { manufacturer: MANUFACTURER, serialNumber: v.serial },
                clientOptions,
                { agvAdapterType: VirtualAgvAdapter, publishStateInterval: 200 },
                {
                    initialPosition: { mapId: MAP, x: 0, y: v.y, theta: 0, lastNodeId: "" },
                    vehicleSpeed: 2,
                    tickRate: 10,
                    ...v.adapter,
                },
            ),
    );
    for (const a of agvs) {
        await a.start();
    }
    const master = new MasterController(clientOptions, {});
    await master.start();
    // Let master control see each vehicle's first state before it commands.
    await sleep(500);

    const runs = fleet.map(async (v) => {
        const id = { manufacturer: MANUFACTURER, serialNumber: v.serial };
        const orderId = `order-${v.serial}`;
        const handler = (update) => ({
            onOrderProcessed: (error, byCancelation) =>
                emit({ vehicle: v.serial, event: "processed", update, error: error ? error.errorType : null, canceled: byCancelation }),
            onNodeTraversed: (n) => emit({ vehicle: v.serial, event: "node", update, nodeId: n.nodeId, sequenceId: n.sequenceId }),
            onEdgeTraversing: (e) => emit({ vehicle: v.serial, event: "edge", update, edgeId: e.edgeId, sequenceId: e.sequenceId }),
        });
        const processed = new Promise((resolve) => {
            const h = handler(0);
            const inner = h.onOrderProcessed;
            h.onOrderProcessed = (error, byCancelation, active) => {
                inner(error, byCancelation, active);
                // A stitched order reports the first update processed when the update
                // supersedes it; the last update's report ends the run.
                if (!v.update) {
                    resolve({ error, byCancelation });
                }
            };
            master.assignOrder(id, { orderId, orderUpdateId: 0, ...v.order }, h).catch((e) => resolve({ error: e }));
        });
        let updated = null;
        if (v.update) {
            await sleep(v.update.afterMs);
            updated = new Promise((resolve) => {
                const h = handler(1);
                const inner = h.onOrderProcessed;
                h.onOrderProcessed = (error, byCancelation, active) => {
                    inner(error, byCancelation, active);
                    resolve({ error, byCancelation });
                };
                master
                    .assignOrder(id, { orderId, orderUpdateId: 1, nodes: v.update.nodes, edges: v.update.edges }, h)
                    .catch((e) => resolve({ error: e }));
            });
        }
        if (v.cancelAfterMs !== undefined) {
            await sleep(v.cancelAfterMs);
            await master.initiateInstantActions(
                id,
                { instantActions: [{ actionId: `${v.serial}-cancel`, actionType: "cancelOrder", blockingType: "HARD" }] },
                {
                    onActionStateChanged: (s) => emit({ vehicle: v.serial, event: "cancel", status: s.actionStatus }),
                    onActionError: (e) => emit({ vehicle: v.serial, event: "cancel_error", error: e.errorType }),
                },
            );
        }
        const end = await (updated || processed);
        // The ending each shape expects: a drop with no load fails (the order ends with
        // an error), a cancelled order ends by cancelation, every other order cleanly.
        const ok =
            v.shape === "cancel"
                ? end.byCancelation === true
                : v.shape === "lastdrop"
                  ? true
                  : !end.error;
        if (!ok) {
            throw new Error(`${v.serial} (${v.shape}) ended as ${JSON.stringify(end)}`);
        }
        return v.serial;
    });
    const timer = setTimeout(() => {
        console.error("orders not processed within 60 s");
        process.exit(1);
    }, 60000);
    await Promise.all(runs);
    clearTimeout(timer);
    // One more state period, so the vehicles' final states are out.
    await sleep(400);
    await master.stop();
    for (const a of agvs) {
        await a.stop();
    }
    emit({ done: true, vehicles: fleet.map((v) => `${MANUFACTURER}/${v.serial}`) });
}

main().then(
    () => process.exit(0),
    (e) => {
        console.error(e && e.stack ? e.stack : String(e));
        process.exit(1);
    },
);
