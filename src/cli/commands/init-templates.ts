/** What `holt init` writes: a commented holt.yml and one example agent, as Holt's own init does. */

export const HOLT_YML = `# holt.yml: the clan of agents that works on this repository.
#   holt up                         start it here (Redis, NATS, Postgres, the orchestrator, every agent)
#   holt forage --goal "..." -w     give it a goal and watch the workflow to its end
#   holt graph -o svg --file g.svg  draw what the agents made from what
#   holt convert                    the same clan as Kubernetes manifests (Holt, Agent)
# Every field: docs/configuration.md. Holt v1.0 files (image, bidding_strategy) are read too.
version: "2"

orchestrator:
  # How many times a reviewer may send work back before the claim fails.
  max_review_iterations: 3
  # A bid later than this counts as "ignore".
  bid_timeout: 30s

agents:
  # The role name: its artefacts say produced_by_role: Greeter.
  Greeter:
    # The tool. It reads the claim as JSON on stdin and prints one JSON result on stdout
    # (artefact_type, artefact_payload, summary, structural_type).
    command: ["sh", "agents/example-agent/run.sh"]
    # The bid. The script reads the artefact as JSON on stdin and prints exclusive, claim, review or
    # ignore. Holt v1.0's fixed bidding_strategy works as well.
    bid_script: ["sh", "agents/example-agent/bid.sh"]
    # ro: the agent may read the repository; rw: it may also change and commit.
    workspace: {mode: ro}
    # With an image, the tools run in a container of it (holt up, with Docker or Podman; and on
    # Kubernetes). agents/example-agent/Dockerfile builds one; holt up --no-containers ignores it.
    # image: example-agent:latest
`;

export const RUN_SH = `#!/bin/sh
# The Greeter's tool: the claim arrives as JSON on stdin; one JSON result goes to stdout.
# Anything on stderr is the agent's log. A non-zero exit becomes a Failure artefact.
set -eu
input=$(cat)
echo "greeting for a claim of $(printf '%s' "$input" | wc -c) bytes" >&2
cat <<'EOF'
{"artefact_type": "Greeting", "artefact_payload": "Hello from the example agent", "summary": "said hello", "structural_type": "Terminal"}
EOF
`;

export const BID_SH = `#!/bin/sh
# The Greeter's bid: the artefact arrives as JSON on stdin; print the bid.
# It takes goals (GoalDefined) alone and leaves everything else.
if grep -q '"type": *"GoalDefined"'; then echo exclusive; else echo ignore; fi
`;

export const DOCKERFILE = `# The example agent's image: holt up runs its tools in it (with Docker or Podman), as a Holt on
# Kubernetes does (holt convert, then kubectl apply). Build: docker build -t example-agent:latest .
# The pup, Holt's agent runtime, comes from the runtime image at start: only the tools live here.
FROM debian:bookworm-slim
COPY run.sh bid.sh /app/
RUN chmod 0755 /app/run.sh /app/bid.sh
WORKDIR /workspace
`;

export const README = `# example-agent

The Greeter: it bids \`exclusive\` on every goal and answers with a \`Greeting\` artefact that ends the
workflow (\`Terminal\`).

- \`run.sh\`: the tool. The claim comes as JSON on stdin; one JSON result goes to stdout.
- \`bid.sh\`: the bid. The artefact comes as JSON on stdin; it prints \`exclusive\` or \`ignore\`.
- \`Dockerfile\`: the image the agent's tools run in (\`holt up\` with an engine, and Kubernetes).

Try it: \`holt up\`, then \`holt forage --goal "say hello" --watch\`.
`;
