import { describe, expect, it } from 'vitest';
import { HoltFileError, parseHoltFile } from './holtfile.ts';
import { llmEnvironment } from './pupenv.ts';
import { registrationOf } from './registry.ts';

const threePhase = `
version: "1.0"
agents:
  Reviewer:       {image: "example-reviewer-agent:latest", command: ["/app/run.sh"], bidding_strategy: "review", workspace: {mode: ro}}
  ParallelWorker: {image: "example-parallel-agent:latest", command: ["/app/run.sh"], bidding_strategy: "claim",  workspace: {mode: ro}}
  Coder:          {image: "example-git-agent:latest",      command: ["/app/run.sh"], bidding_strategy: "exclusive", workspace: {mode: rw}}
services: {redis: {image: redis:7-alpine}}
`;

const controller = `
version: "1.0"
agents:
  CoderController:
    mode: "controller"
    image: "example-git-agent:latest"
    command: ["/app/pup"]
    bidding_strategy: "exclusive"
    worker: {image: "example-git-agent:latest", max_concurrent: 2, command: ["/app/run.sh"], workspace: {mode: rw}}
`;

function problemsOf(text: string): string[] {
  try {
    parseHoltFile(text);
  } catch (e) {
    if (e instanceof HoltFileError) return e.problems;
    throw e;
  }
  throw new Error('expected the file to be rejected');
}

describe("Holt file: Holt's holt.yml v1.0", () => {
  it('accepts the three-phase fixture with defaults', () => {
    const f = parseHoltFile(threePhase);
    expect(f.agents.map((a) => [a.role, a.bidding.strategy, a.workspace.mode])).toEqual([
      ['Reviewer', 'review', 'ro'],
      ['ParallelWorker', 'claim', 'ro'],
      ['Coder', 'exclusive', 'rw'],
    ]);
    expect(f.holt.orchestrator.maxReviewIterations).toBe(3);
    expect(f.agents.map(registrationOf).every((r) => r.kind === 'standard')).toBe(true);
  });

  it('maps mode: controller with worker fields onto a scalable agent', () => {
    const [a] = parseHoltFile(controller).agents;
    expect(a?.worker).toMatchObject({ maxConcurrent: 2, command: ['/app/run.sh'], workspaceMode: 'rw' });
    expect(registrationOf(a!)).toEqual({
      role: 'CoderController',
      kind: 'scalable',
      worker_target: 'codercontroller',
      max_concurrent: 2,
    });
  });

  it('max_review_iterations 0 means unlimited and is kept', () => {
    const f = parseHoltFile(
      `version: "1.0"\norchestrator: {max_review_iterations: 0}\n${threePhase.split('\n').slice(2).join('\n')}`,
    );
    expect(f.holt.orchestrator.maxReviewIterations).toBe(0);
  });

  it('ignores a stale role: key with a warning, like Holt', () => {
    const f = parseHoltFile(`version: "1.0"
agents:
  Coder: {role: old, image: x, command: ["/run"], bidding_strategy: exclusive}
`);
    expect(f.warnings).toContain('agents.Coder: unknown key "role" ignored');
  });

  it.each([
    [
      'wrong version',
      'version: "0.9"\nagents: {A: {image: x, command: [a], bidding_strategy: claim}}',
      /version must be "1.0"/,
    ],
    ['no agents', 'version: "1.0"\nagents: {}', /at least one agent/],
    [
      'missing image',
      'version: "1.0"\nagents: {A: {command: [a], bidding_strategy: claim}}',
      /agents\.A\.image: required/,
    ],
    [
      'missing command',
      'version: "1.0"\nagents: {A: {image: x, bidding_strategy: claim}}',
      /agents\.A\.command: required/,
    ],
    [
      'empty command',
      'version: "1.0"\nagents: {A: {image: x, command: [], bidding_strategy: claim}}',
      /non-empty/,
    ],
    [
      'no bidding',
      'version: "1.0"\nagents: {A: {image: x, command: [a]}}',
      /bidding_strategy: required unless bid_script/,
    ],
    [
      'bad strategy',
      'version: "1.0"\nagents: {A: {image: x, command: [a], bidding_strategy: maybe}}',
      /bidding_strategy/,
    ],
    [
      'bad role',
      'version: "1.0"\nagents: {"A_B": {image: x, command: [a], bidding_strategy: claim}}',
      /letters, digits and hyphens/,
    ],
    [
      'bad mode',
      'version: "1.0"\nagents: {A: {image: x, command: [a], bidding_strategy: claim, mode: worker}}',
      /mode must be "controller"/,
    ],
    [
      'controller without worker',
      'version: "1.0"\nagents: {A: {mode: controller, image: x, command: [a], bidding_strategy: claim}}',
      /worker\.image: required/,
    ],
    [
      'negative max_concurrent',
      'version: "1.0"\nagents: {A: {mode: controller, image: x, command: [a], bidding_strategy: claim, worker: {image: y, command: [b], max_concurrent: -1}}}',
      /max_concurrent must be >= 1/,
    ],
    [
      'bad workspace mode',
      'version: "1.0"\nagents: {A: {image: x, command: [a], bidding_strategy: claim, workspace: {mode: rwx}}}',
      /workspace\.mode/,
    ],
    [
      'negative iterations',
      'version: "1.0"\norchestrator: {max_review_iterations: -1}\nagents: {A: {image: x, command: [a], bidding_strategy: claim}}',
      /max_review_iterations must be >= 0/,
    ],
    ['not yaml', 'version: "1.0"\nagents: [', /not valid YAML/],
  ])('rejects %s with a message naming the field', (_name, text, message) => {
    expect(problemsOf(text).join('\n')).toMatch(message);
  });

  it('max_concurrent 0 means 1, as in Holt', () => {
    const [a] = parseHoltFile(
      'version: "1.0"\nagents: {A: {mode: controller, image: x, command: [a], bidding_strategy: claim, worker: {image: y, command: [b], max_concurrent: 0}}}',
    ).agents;
    expect(a?.worker?.maxConcurrent).toBe(1);
  });
});

describe('Holt file: version 2 extensions', () => {
  it('max_bid_timeout: the widest bid window, a duration, never below bid_timeout (issue 29 item 8)', () => {
    const agents = 'agents: {A: {command: [a], bidding_strategy: claim}}';
    const f = parseHoltFile(`version: "2"\norchestrator: {bid_timeout: 2s, max_bid_timeout: 1m}\n${agents}`);
    expect(f.holt.orchestrator).toMatchObject({ bidTimeoutSeconds: 2, maxBidTimeoutSeconds: 60 });
    // Omitted: the orchestrator takes 4 × the bid timeout.
    expect(parseHoltFile(`version: "2"\n${agents}`).holt.orchestrator.maxBidTimeoutSeconds).toBeUndefined();
    expect(
      problemsOf(`version: "2"\norchestrator: {bid_timeout: 10s, max_bid_timeout: 5s}\n${agents}`),
    ).toEqual(['orchestrator.max_bid_timeout: must be at least orchestrator.bid_timeout (30s by default)']);
    expect(problemsOf(`version: "2"\norchestrator: {max_bid_timeout: 20s}\n${agents}`)).toHaveLength(1);
  });

  it('image is optional; replicas make an agent scalable; durations parse', () => {
    const f = parseHoltFile(`version: "2"
orchestrator: {bid_timeout: 2s}
agents:
  Writer: {command: ["./write.sh"], bidding_strategy: exclusive, replicas: 3, health_check: {command: ["true"], interval: 1m}}
  Planner:
    bidding_strategy: claim
    llm: {model: m, max_steps: 4, tools: [{name: ls, argv: [ls, "{{path}}"], timeout: 10s}]}
`);
    expect(f.holt.orchestrator.bidTimeoutSeconds).toBe(2);
    const [w, p] = f.agents;
    expect(registrationOf(w!)).toMatchObject({
      kind: 'scalable',
      worker_target: 'writer',
      max_concurrent: 3,
    });
    expect(w?.healthCheck).toEqual({ command: ['true'], intervalSeconds: 60, timeoutSeconds: 5 });
    expect(p?.llm?.tools[0]).toMatchObject({ name: 'ls', timeoutSeconds: 10 });
  });

  it("an LLM agent's contract (result_fields, must_end_with, a terminate tool) reaches the pup's environment", () => {
    const f = parseHoltFile(`version: "2"
agents:
  Reporter:
    bidding_strategy: exclusive
    llm:
      must_end_with: publish
      result_fields: {title: {type: string, description: a headline}, score: {type: integer, required: false}}
      tools: [{name: publish, argv: [./publish.sh], terminate: true}]
`);
    const [r] = f.agents;
    const env = llmEnvironment(r!, undefined);
    expect(env.HOLT_LLM_MUST_END_WITH).toBe('publish');
    expect(JSON.parse(env.HOLT_LLM_RESULT_FIELDS!)).toEqual({
      title: { type: 'string', required: true, description: 'a headline' },
      score: { type: 'integer', required: false, description: '' },
    });
    expect(JSON.parse(env.HOLT_LLM_TOOLS!)[0]).toMatchObject({ name: 'publish', terminate: true });
    expect(
      problemsOf(`version: "2"
agents:
  R: {bidding_strategy: exclusive, llm: {must_end_with: lint, tools: [{name: lint, argv: [lint]}]}}
`).join('\n'),
    ).toMatch(/lint cannot end a turn: name submit_result or a tool with terminate: true/);
    expect(
      problemsOf(`version: "2"
agents:
  R: {bidding_strategy: exclusive, llm: {result_fields: {n: {type: float}}}}
`).join('\n'),
    ).toMatch(/result_fields/);
  });

  it('a workflow agent: steps carried to the pup, a branch to nowhere or an undeclared tool refused', () => {
    const f = parseHoltFile(`version: "2"
agents:
  Triage:
    bidding_strategy: exclusive
    llm:
      tools: [{name: lint, argv: [lint, "{{path}}"]}]
      workflow:
        - {name: classify, llm: {prompt: "Classify {{target}}", output: {label: {type: string}}}}
        - {name: route, branch: {field: classify.label, cases: {bug: check}, default: end}}
        - {name: check, code: {tool: lint, args: {path: "src/{{classify.label}}"}, timeout: 2m}}
`);
    const steps = JSON.parse(llmEnvironment(f.agents[0]!, undefined).HOLT_LLM_WORKFLOW!);
    expect(steps.map((x: { name: string }) => x.name)).toEqual(['classify', 'route', 'check']);
    expect(steps[2].code).toMatchObject({
      tool: 'lint',
      args: { path: 'src/{{classify.label}}' },
      timeoutSeconds: 120,
    });
    const problems = problemsOf(`version: "2"
agents:
  T:
    bidding_strategy: exclusive
    llm:
      workflow:
        - {name: a, branch: {field: target.type, cases: {X: nowhere}}}
        - {name: b, code: {tool: ghost}}
`).join('\n');
    expect(problems).toMatch(/step a branches to nowhere, which is no step/);
    expect(problems).toMatch(/step b runs tool ghost, which is not declared/);
  });

  it('two scalable agents cannot share a worker target', () => {
    expect(
      problemsOf(`version: "2"
agents:
  A: {command: [a], bidding_strategy: claim, replicas: 2, worker: {command: [a], target: t}}
  B: {command: [b], bidding_strategy: claim, replicas: 2, worker: {command: [b], target: t}}
`).join('\n'),
    ).toMatch(/worker target "t" is also used by A/);
  });
});
