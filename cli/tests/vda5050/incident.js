// A VDA 5050 fleet driven by a third-party implementation (vda-5050-lib 1.4.0 from the
// npm registry: its MasterController, AgvController and VirtualAgvAdapter, which
// simulates vehicle motion), for cli/tests/vda5050_incident.rs. Nothing here knows
// about Audita: the fleet talks VDA 5050 over MQTT and the bridge sidecars record it.
//
// The story: a human work zone spans x in [2, 6] m, y in [-1, 4] m of hall-1, and the
// site's rule is 1 m/s inside it. Master control sends two vehicles through the zone,
// each on an order "pick at station A, drive, drop at station B":
// - acme/agv1's order sets no speed limit on its edge, so the virtual vehicle drives
//   at its full 2 m/s through the zone (the incident);
// - acme/agv2's order limits its edge to 0.8 m/s (the control: no incident).
//
// Usage: node incident.js MQTT_PORT
// Prints one JSON line per order processed, then `{"done": true, ...}`; exit 0 when
// both orders were processed without error, 1 otherwise (message on stderr).

"use strict";

const { AgvController, MasterController, VirtualAgvAdapter } = require("vda-5050-lib");

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
    console.error("usage: node incident.js MQTT_PORT");
    process.exit(2);
}

const clientOptions = {
    interfaceName: "uagv",
    transport: { brokerUrl: `mqtt://127.0.0.1:${port}` },
    vdaVersion: "2.0.0",
};
const MAP = "hall-1";

const vehicles = [
    {
        id: { manufacturer: "acme", serialNumber: "agv1" },
        start: { x: 0, y: 0 },
        goal: { x: 8, y: 0 },
        maxSpeed: undefined,
    },
    {
        id: { manufacturer: "acme", serialNumber: "agv2" },
        start: { x: 0, y: 3 },
        goal: { x: 4, y: 3 },
        maxSpeed: 0.8,
    },
];

function order(master, v) {
    const serial = v.id.serialNumber;
    const edge = {
        edgeId: `${serial}-A-B`,
        sequenceId: 1,
        startNodeId: `${serial}-A`,
        endNodeId: `${serial}-B`,
        released: true,
        actions: [],
    };
    if (v.maxSpeed !== undefined) {
        edge.maxSpeed = v.maxSpeed;
    }
    return {
        orderId: master.createUuid(),
        orderUpdateId: 0,
        nodes: [
            {
                nodeId: `${serial}-A`,
                sequenceId: 0,
                released: true,
                nodePosition: { x: v.start.x, y: v.start.y, mapId: MAP },
                actions: [
                    {
                        actionId: `${serial}-pick`,
                        actionType: "pick",
                        blockingType: "HARD",
                        actionParameters: [
                            { key: "stationType", value: "floor" },
                            { key: "loadType", value: "EPAL" },
                            { key: "duration", value: 0.5 },
                        ],
                    },
                ],
            },
            {
                nodeId: `${serial}-B`,
                sequenceId: 2,
                released: true,
                // `allowedDeviationXy`: the spelling of the 2.0.0 schema, which
                // this library follows (the 2.0 text and 2.1 say `allowedDeviationXY`).
                nodePosition: { x: v.goal.x, y: v.goal.y, mapId: MAP, allowedDeviationXy: 0.1 },
                actions: [
                    {
                        actionId: `${serial}-drop`,
                        actionType: "drop",
                        blockingType: "HARD",
                        actionParameters: [
                            { key: "stationType", value: "floor" },
                            { key: "loadType", value: "EPAL" },
                            { key: "duration", value: 0.5 },
                        ],
                    },
                ],
            },
        ],
        edges: [edge],
    };
}

async function main() {
    const agvs = vehicles.map(
        (v) =>
            new AgvController(
                v.id,
                clientOptions,
                // A state at least every 200 ms: the pose and velocity of a moving
                // vehicle reach master control (and the record) while it drives.
                { agvAdapterType: VirtualAgvAdapter, publishStateInterval: 200 },
                {
                    initialPosition: { mapId: MAP, x: v.start.x, y: v.start.y, theta: 0, lastNodeId: "" },
                    vehicleSpeed: 2,
                    tickRate: 10,
                },
            ),
    );
    for (const a of agvs) {
        await a.start();
    }
    const master = new MasterController(clientOptions, {});
    await master.start();
    // Let master control see each vehicle's first state before it commands.
    await new Promise((r) => setTimeout(r, 500));

    const done = vehicles.map(
        (v) =>
            new Promise((resolve, reject) => {
                const o = order(master, v);
                master
                    .assignOrder(v.id, o, {
                        onOrderProcessed: (withError, byCancelation, active) => {
                            const line = {
                                vehicle: `${v.id.manufacturer}/${v.id.serialNumber}`,
                                orderId: o.orderId,
                                error: withError ? withError.errorType : null,
                                canceled: byCancelation,
                            };
                            console.log(JSON.stringify(line));
                            if (withError) {
                                reject(new Error(`order of ${line.vehicle}: ${JSON.stringify(withError)}`));
                            } else {
                                resolve(line);
                            }
                        },
                    })
                    .catch(reject);
            }),
    );
    const timer = setTimeout(() => {
        console.error("orders not processed within 60 s");
        process.exit(1);
    }, 60000);
    await Promise.all(done);
    clearTimeout(timer);
    // One more state period, so the vehicles' final states are out.
    await new Promise((r) => setTimeout(r, 400));
    await master.stop();
    for (const a of agvs) {
        await a.stop();
    }
    console.log(JSON.stringify({ done: true, orders: vehicles.length }));
}

main().then(
    () => process.exit(0),
    (e) => {
        console.error(e && e.stack ? e.stack : String(e));
        process.exit(1);
    },
);
