import { writeFileSync } from 'node:fs';
import { Blackboard } from '../../blackboard/client.ts';
import type { ArtefactGraph } from '../../graph/model.ts';
import { graphPage } from '../../graph/page.ts';
import { toDot, toMermaid } from '../../graph/render.ts';
import { dotToSvg } from '../../graph/svg.ts';
import { drawBoard } from '../board.ts';
import { CliError, EXIT, err } from '../output.ts';
import { resolveTarget } from '../resolve.ts';
import { GRAPH_FORMATS } from './graph-formats.ts';
import { serveGraph } from './graph-serve.ts';

export interface GraphOptions {
  name?: string;
  output: string;
  goal?: string;
  file?: string;
  serve?: boolean;
  port?: string;
}

/** `holt graph`: the artefact graph of one workflow (--goal) or of all, as Mermaid, DOT, SVG or a page. */
export async function graph(opts: GraphOptions): Promise<void> {
  if (!(GRAPH_FORMATS as readonly string[]).includes(opts.output))
    throw new CliError(
      `-o: unknown format "${opts.output}" (one of ${GRAPH_FORMATS.join(', ')})`,
      EXIT.usage,
    );
  if (opts.serve && opts.output !== 'html') throw new CliError('--serve goes with -o html', EXIT.usage);
  const s = resolveTarget(opts.name);
  const bb = Blackboard.connect(s.redisUrl, s.name, s.redisOptions);
  const title = `Holt ${s.name}${opts.goal ? `, workflow ${opts.goal}` : ''}`;
  if (opts.serve) return serveGraph(bb, title, () => drawBoard(bb, opts.goal), opts.port);
  let g: ArtefactGraph;
  try {
    g = await drawBoard(bb, opts.goal);
  } finally {
    await bb.close();
  }
  if (!g.nodes.length) throw new CliError(`no artefacts on instance '${s.name}' yet`, EXIT.notFound);
  const dot = toDot(g, title);
  const text =
    opts.output === 'mermaid'
      ? toMermaid(g)
      : opts.output === 'dot'
        ? dot
        : opts.output === 'svg'
          ? await dotToSvg(dot)
          : graphPage(await dotToSvg(dot), title, false);
  if (!opts.file) return void process.stdout.write(text);
  writeFileSync(opts.file, text);
  err(`${opts.file}: ${g.nodes.length} artefacts, ${g.goals.length} workflow(s)`);
}
