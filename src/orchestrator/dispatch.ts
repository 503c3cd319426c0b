import type { Blackboard, Publication } from '../blackboard/client.ts';
import type { AgentRegistration, Claim, ClaimType, Phase } from '../blackboard/types.ts';
import type { GrantReason } from './decide.ts';

export interface Grant {
  claim: Claim;
  role: string;
  claimType: ClaimType;
  phase: Phase;
  /** grant: a new grant; rework: a feedback claim was created; recovery: re-announced after a restart. */
  reason?: GrantReason;
}

/** Hands a grant (already recorded on the claim) to whoever runs the role. Must be idempotent. */
export interface GrantDispatcher {
  dispatch(grant: Grant): Promise<void>;
  /**
   * The dispatch as plain messages, when that is all it is (null otherwise). The orchestrator then
   * publishes them inside the claim's compare-and-set: the grant and its announcement are written
   * together, and no crash can fall between them.
   */
  publications?(grant: Grant): Publication[] | null;
}

/**
 * Holt's path: the grant notification on `agent:{role}:events`, plus `claim_granted` for a new grant.
 * A feedback claim is announced by its claim_events message (Holt sends no grant for it), and a
 * re-announcement after a restart sends no second claim_granted.
 */
export class HoltDispatcher implements GrantDispatcher {
  readonly bb: Blackboard;
  readonly imageOf: (role: string) => string;
  constructor(bb: Blackboard, imageOf: (role: string) => string = () => '') {
    this.bb = bb;
    this.imageOf = imageOf;
  }

  publications(g: Grant): Publication[] {
    const reason = g.reason ?? 'grant';
    if (reason === 'rework') return [];
    const grant = this.bb.grantPublication(g.role, g.claim.id, g.claimType);
    if (reason === 'recovery') return [grant];
    return [
      grant,
      this.bb.workflowEventPublication({
        event: 'claim_granted',
        data: {
          claim_id: g.claim.id,
          agent_name: g.role,
          grant_type: g.claimType,
          agent_image_id: this.imageOf(g.role),
        },
      }),
    ];
  }

  async dispatch(g: Grant): Promise<void> {
    // In this order on one connection, in one write (no round trip in between).
    await Promise.all(this.publications(g).map((p) => this.bb.publish(p)));
  }
}

/** Picks the dispatcher by the role's registered kind; a role not registered takes the Holt path. */
export class DispatchRouter implements GrantDispatcher {
  readonly standard: GrantDispatcher;
  readonly scalable: GrantDispatcher;
  readonly kindOf: (role: string) => AgentRegistration['kind'] | undefined;
  constructor(
    standard: GrantDispatcher,
    scalable: GrantDispatcher,
    kindOf: (role: string) => AgentRegistration['kind'] | undefined,
  ) {
    this.standard = standard;
    this.scalable = scalable;
    this.kindOf = kindOf;
  }

  private route(role: string): GrantDispatcher {
    return this.kindOf(role) === 'scalable' ? this.scalable : this.standard;
  }

  dispatch(g: Grant): Promise<void> {
    return this.route(g.role).dispatch(g);
  }

  publications(g: Grant): Publication[] | null {
    return this.route(g.role).publications?.(g) ?? null;
  }
}
