// A tool service for a living agent's asynchronous tool (`async: nats` in the agent's llm.tools): it
// hears the requests on cmd.tool.<instance>.<name> and answers each one, once, on the request's own
// reply subject (msg.respond): an answer sent anywhere else is refused by NATS or ignored by the agent.
// It connects as a NATS user that may do nothing else: locally `holt tool-url --tool <name>` prints the
// URL of that one tool's user (`holt tool-url`: the `tool` user, every tool of the instance); on a
// cluster with the bundled NATS it is the key `url` of the Secret `<holt>-tool-<name>` (HOLT_INSTANCE:
// its key `instance`; the key `tool-url` of the Secret `<holt>-nats` is the broad `tool` user), and
// the pod carries `holt.io/instance: <holt>`, so the Holt's NetworkPolicies let it reach NATS. It holds
// no other credential. HOLT_INSTANCE names the instance whose requests it hears (default: any, `*`, which only
// a cluster's `tool` user may hear).
//
//   NATS_URL=$(holt tool-url --tool lookup) HOLT_INSTANCE=default node examples/living/tool-service.mjs lookup
//
// A request is {instance, role, turn_id, tool_call_id, tool, args, deadline_ms}; the answer is
// {turn_id, tool_call_id, tool?, ok?, output, error?}. This one looks a build up in a table it makes up.
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

// The NATS client of the holt program next to it (HOLT_APP_PACKAGE: its package.json in an image).
const require = createRequire(process.env.HOLT_APP_PACKAGE ?? import.meta.url);
const { connect } = require('@nats-io/transport-node');

const url = new URL(process.env.NATS_URL ?? '');
const tool = process.argv[2] ?? 'lookup';
const instance = process.env.HOLT_INSTANCE || '*';
const subject = `cmd.tool.${instance}.${tool}`;
const nc = await connect({
  servers: `${url.hostname}:${url.port || 4222}`,
  user: decodeURIComponent(url.username),
  pass: decodeURIComponent(url.password),
});
nc.subscribe(subject, {
  callback: (err, msg) => {
    if (err) return;
    let req;
    try {
      req = msg.json();
    } catch {
      return; // not a request: nothing to answer
    }
    const build = String(req.args?.build ?? '?');
    const output = `build ${build}: green, 212/212 tests passed`;
    msg.respond(JSON.stringify({ turn_id: req.turn_id, tool_call_id: req.tool_call_id, tool, output }));
    console.log(JSON.stringify({ answered: req.tool_call_id, role: req.role, tool, build }));
  },
});
await nc.flush();
console.log(`answering ${subject}`);
// A readiness port for a Deployment's probe (HEALTH_PORT): ready once subscribed.
if (process.env.HEALTH_PORT) createServer((_q, r) => r.end('ok')).listen(Number(process.env.HEALTH_PORT));
process.on('SIGTERM', () => nc.drain().then(() => process.exit(0)));
