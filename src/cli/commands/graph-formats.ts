/** `holt graph -o`: the formats (apart from the command, so the CLI's option list loads no renderer). */
export const GRAPH_FORMATS = ['mermaid', 'dot', 'svg', 'html'] as const;
