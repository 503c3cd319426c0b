import { instance } from '@viz-js/viz';

/** DOT to SVG with Graphviz itself (compiled to WebAssembly: no binary to install). */
export async function dotToSvg(dot: string): Promise<string> {
  const viz = await instance();
  const r = viz.render(dot, { format: 'svg' });
  if (r.status !== 'success')
    throw new Error(`graphviz could not draw the graph: ${r.errors.map((e) => e.message).join('; ')}`);
  return r.output;
}
