// Shared by the demo agents: read the pup's JSON from stdin, print one JSON result on stdout.
export async function readInput() {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

export function reply(artefact_type, artefact_payload, summary, structural_type) {
  process.stdout.write(`${JSON.stringify({ artefact_type, artefact_payload, summary, structural_type })}\n`);
}
