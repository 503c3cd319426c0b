import { writeFileSync } from 'node:fs';
import { Blackboard } from '../../blackboard/client.ts';
import type { Artefact, Claim } from '../../blackboard/types.ts';
import { artefactGraph, workflowOf } from '../../graph/model.ts';
import { toDot, toMermaid } from '../../graph/render.ts';
import { dotToSvg } from '../../graph/svg.ts';
import { CliError, EXIT, err } from '../output.ts';
import { resolveTarget } from '../resolve.ts';
import { resolveShortId } from './hoard.ts';

export const GRAPH_FORMATS = ['mermaid', 'dot', 'svg'] as const;

export interface GraphOptions {
  name?: string;
  output: string;
  goal?: string;
  file?: string;
}

/** The artefacts on the blackboard and the claim of each (one read of each kind). */
async function readBoard(bb: Blackboard): Promise<{ artefacts: Artefact[]; claims: Map<string, Claim> }> {
  const ids = await bb.listArtefactIds();
  const artefacts = (await bb.getArtefacts(ids)).filter((a): a is Artefact => a !== null);
  const claimIds = await bb.claimIdsForArtefacts(artefacts.map((a) => a.id));
  const wanted = claimIds.filter((c): c is string => c !== null);
  const claims = new Map<string, Claim>();
  for (const vc of await bb.getClaims(wanted)) if (vc) claims.set(vc.claim.artefact_id, vc.claim);
  return { artefacts, claims };
}

/** `holt graph`: the artefact graph of one workflow (--goal) or of all, as Mermaid, DOT or SVG. */
export async function graph(opts: GraphOptions): Promise<void> {
  if (!(GRAPH_FORMATS as readonly string[]).includes(opts.output))
    throw new CliError(
      `-o: unknown format "${opts.output}" (one of ${GRAPH_FORMATS.join(', ')})`,
      EXIT.usage,
    );
  const s = resolveTarget(opts.name);
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  let board: Awaited<ReturnType<typeof readBoard>>;
  try {
    board = await readBoard(bb);
  } finally {
    await bb.close();
  }
  let artefacts = board.artefacts;
  if (opts.goal) {
    const goal = resolveShortId(
      artefacts.map((a) => a.id),
      opts.goal,
    );
    artefacts = workflowOf(artefacts, goal);
  }
  if (!artefacts.length) throw new CliError(`no artefacts on instance '${s.name}' yet`, EXIT.notFound);
  const g = artefactGraph(artefacts, board.claims);
  const dot = toDot(g, `Holt ${s.name}`);
  const text = opts.output === 'mermaid' ? toMermaid(g) : opts.output === 'dot' ? dot : await dotToSvg(dot);
  if (!opts.file) return void process.stdout.write(text);
  writeFileSync(opts.file, text);
  err(`${opts.file}: ${g.nodes.length} artefacts, ${g.goals.length} workflow(s)`);
}
