import { z } from 'zod';

/**
 * A `tools/list` page read leniently: the SDK's own `listTools` refuses the whole page when one tool's
 * schema is unusable, so the pup (src/llm/mcp) refuses that tool alone and the operator (ToolServer
 * discovery) still lists the others.
 */
export const LenientToolList = z.looseObject({
  tools: z.array(
    z.looseObject({ name: z.string(), description: z.string().optional(), inputSchema: z.unknown() }),
  ),
  nextCursor: z.string().optional(),
});
