import { randomUUID } from 'node:crypto';
import { APPROVAL_TYPE, PERSON_ROLE, personAnswer } from '../blackboard/approval.ts';
import { claimsForArtefacts } from '../blackboard/claim-engine.ts';
import { Blackboard } from '../blackboard/client.ts';
import type { Artefact, Claim } from '../blackboard/types.ts';
import { type ArtefactGraph, artefactGraph, workflowOf } from '../graph/model.ts';
import { carrierOf, newTraceCarrier, type TraceCarrier } from '../telemetry/carrier.ts';
import { globMatch } from './format.ts';
import { CliError, EXIT } from './output.ts';
import type { BlackboardTarget } from './target.ts';

// What the blackboard commands read and write, without printing: `holt forage|hoard|questions|answer|
// graph` print it for a person, `holt mcp` (src/mcp-server) returns it to an MCP client. Nothing here
// writes to stdout, which is the MCP protocol's channel under `holt mcp`.

/** A connection to the target's blackboard for the length of `fn`. */
export async function withBoard<T>(s: BlackboardTarget, fn: (bb: Blackboard) => Promise<T>): Promise<T> {
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  try {
    return await fn(bb);
  } finally {
    await bb.close();
  }
}

/** A full id, or a prefix of at least 6 characters that names exactly one artefact. */
export function resolveShortId(all: string[], wanted: string): string {
  if (wanted.length < 6)
    throw new CliError(`artefact id "${wanted}" is too short: give at least 6 characters`, EXIT.usage);
  const hits = all.filter((id) => id.startsWith(wanted));
  if (hits.length === 0) throw new CliError(`no artefacts found matching "${wanted}"`, EXIT.notFound);
  if (hits.length > 1) {
    const shown = hits.slice(0, 10).map((h) => `  ${h}`);
    if (hits.length > 10) shown.push(`  ...and ${hits.length - 10} more`);
    throw new CliError(`"${wanted}" is ambiguous; it matches:\n${shown.join('\n')}`, EXIT.usage);
  }
  return hits[0]!;
}

/**
 * A new workflow: a GoalDefined artefact by the user. Returns its id. The goal starts the workflow's
 * trace: the caller's (`trace`), the active span's, else a new one.
 */
export async function createGoal(
  bb: Blackboard,
  text: string,
  id: string = randomUUID(),
  trace?: TraceCarrier,
): Promise<string> {
  if (!text.trim()) throw new CliError('the goal must not be empty', EXIT.usage);
  await bb.createArtefact({
    ...(trace ?? carrierOf() ?? newTraceCarrier()),
    id,
    logical_id: id,
    version: 1,
    structural_type: 'Standard',
    type: 'GoalDefined',
    payload: text,
    source_artefacts: [],
    produced_by_role: 'user',
  });
  return id;
}

/** One artefact by its id or a prefix of 6+ characters. */
export async function findArtefact(bb: Blackboard, idOrPrefix: string): Promise<Artefact> {
  const full = resolveShortId(await bb.listArtefactIds(), idOrPrefix);
  const a = await bb.getArtefact(full);
  if (!a) throw new CliError(`artefact ${full} is gone (removed by retention?)`, EXIT.notFound);
  return a;
}

export interface ArtefactFilter {
  sinceMs?: number;
  untilMs?: number;
  /** A glob on the artefact type (`Draft*`). */
  type?: string;
  /** The producing role. */
  agent?: string;
  /** One workflow: its goal's id (or a prefix of 6+ characters) and everything made from it. */
  goal?: string;
}

/** The artefacts on the blackboard, oldest first, that pass the filter. */
export async function listArtefacts(bb: Blackboard, f: ArtefactFilter = {}): Promise<Artefact[]> {
  const ids = await bb.listArtefactIds({ sinceMs: f.sinceMs, untilMs: f.untilMs });
  let all = (await bb.getArtefacts(ids)).filter((a): a is Artefact => a !== null);
  if (f.goal)
    all = workflowOf(
      all,
      resolveShortId(
        all.map((a) => a.id),
        f.goal,
      ),
    );
  return all.filter(
    (a) => (!f.type || globMatch(f.type, a.type)) && (!f.agent || a.produced_by_role === f.agent),
  );
}

/** Questions that no Answer artefact settles yet (an approval: no person's Answer), oldest first. */
export async function openQuestions(bb: Blackboard): Promise<Artefact[]> {
  const all = await listArtefacts(bb);
  const answers = all.filter((a) => a.structural_type === 'Answer');
  const cited = (as: Artefact[]) => new Set(as.flatMap((a) => a.source_artefacts));
  const byAnyone = cited(answers);
  const byPerson = cited(answers.filter((a) => a.produced_by_role === PERSON_ROLE));
  return all.filter(
    (q) => q.structural_type === 'Question' && !(q.type === APPROVAL_TYPE ? byPerson : byAnyone).has(q.id),
  );
}

/** The user's Answer to a Question (an id or a prefix); the asking agent resumes. */
export async function answerQuestion(
  bb: Blackboard,
  questionId: string,
  text: string,
): Promise<{ answerId: string; questionId: string }> {
  if (!text.trim()) throw new CliError('the answer must not be empty', EXIT.usage);
  const q = await findArtefact(bb, questionId);
  if (q.structural_type !== 'Question') throw new CliError(`${q.id} is not a Question artefact`, EXIT.usage);
  const a = personAnswer(q.id, text);
  await bb.createArtefact(a);
  const answerId = a.id;
  return { answerId, questionId: q.id };
}

/** The artefacts on the blackboard and the claim of each (one read of each kind). */
async function readBoard(bb: Blackboard): Promise<{ artefacts: Artefact[]; claims: Map<string, Claim> }> {
  const artefacts = await listArtefacts(bb);
  const claims = await claimsForArtefacts(
    bb,
    artefacts.map((a) => a.id),
  );
  return { artefacts, claims };
}

/** The graph now: of one workflow when `goal` (an id or a prefix) is given, else of all. */
export async function drawBoard(bb: Blackboard, goal?: string): Promise<ArtefactGraph> {
  const board = await readBoard(bb);
  const artefacts = goal
    ? workflowOf(
        board.artefacts,
        resolveShortId(
          board.artefacts.map((a) => a.id),
          goal,
        ),
      )
    : board.artefacts;
  return artefactGraph(artefacts, board.claims);
}
