import type { AgentCard, AgentSkill } from '@a2a-js/sdk';

/**
 * A living agent's A2A agent card (pure), made from its Agent's `ingress.a2a` (description, skills):
 * one JSON-RPC interface for A2A v1.0 and the same for v0.3 callers, bearer tokens (the ingress's) as
 * its security scheme, streaming, no push notifications (delivery to callbacks is Holt's own).
 */

export interface CardInfo {
  description: string;
  skills: { id: string; name: string; description: string; tags: string[]; examples: string[] }[];
}

export const A2A_VERSIONS = ['1.0', '0.3'] as const;

export function agentCard(role: string, url: string, info: CardInfo, version: string): AgentCard {
  const description = info.description || `The living agent ${role} of a Holt.`;
  const skills: AgentSkill[] = (
    info.skills.length
      ? info.skills
      : [{ id: 'message', name: role, description, tags: ['holt'], examples: [] }]
  ).map((s) => ({ ...s, inputModes: [], outputModes: [], securityRequirements: [] }));
  return {
    name: role,
    description,
    version,
    provider: undefined,
    documentationUrl: undefined,
    iconUrl: undefined,
    supportedInterfaces: A2A_VERSIONS.map((v) => ({
      url,
      protocolBinding: 'JSONRPC',
      tenant: '',
      protocolVersion: v,
    })),
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      bearer: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            scheme: 'bearer',
            bearerFormat: 'opaque',
            description: 'An ingress token of the agent (holt token create, or its Agent ingress.tokens).',
          },
        },
      },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ['text/plain', 'application/json'],
    defaultOutputModes: ['text/plain'],
    skills,
    signatures: [],
  };
}
