import type { Role } from '../domain.ts';

/**
 * What a route needs. `public` routes need no token; `authenticated` ones any signed-in user; the rest
 * a role that holds the permission. Every route names one in `config.permission` (see guard.ts).
 */
export const permissions = [
  'public',
  'authenticated',
  'voters:read',
  'voters:write',
  'voters:delete',
  'voters:import',
  'voters:export',
  'segments:manage',
  'messages:send',
  'messages:read',
  'campaigns:manage',
  'grievances:read',
  'grievances:write',
  'team:manage',
  /** Listing the team (managers: id, name, role, active and coverage, to assign conversations). */
  'team:read',
  'webhooks:manage',
  'payments:manage',
  'audit:read',
  /** Opt-outs, templates and silence periods; replies. */
  'consent:manage',
  /** The workspace's own provider accounts (channel accounts). */
  'channels:manage',
  /** An account's channel log: its exchanges with the provider (politicians and managers). */
  'channels:log',
  /** Conversations (a volunteer: those assigned to them) and reading quick replies. */
  'conversations:handle',
  /** Creating, changing and deleting quick replies. */
  'quick_replies:manage',
  /** The workspace's own settings (its name, its time zone). */
  'workspace:manage',
  /** Constituencies, wards and booths with their aliases (everyone reads them). */
  'places:manage',
  /** The workspace's custom voter fields (everyone reads them). */
  'voter_fields:manage',
  /** Tagging voters in bulk, by ids or by filters. */
  'voters:tag',
  /** Surveys: building them, running them, their results and responses (politicians and managers). */
  'surveys:manage',
  /** Turfs (making, changing, assigning them), every visit, poll-day turnout and the to-call list. */
  'turfs:manage',
  /** Field work: one's own turfs and walk lists, visits and poll-day marks for their voters (everyone). */
  'field:work',
  /** Data-principal requests: listing, recording and answering them (politicians and managers). */
  'privacy:requests',
  /** The privacy notice, a person's export and erasure, and the breach register (politicians). */
  'privacy:manage',
] as const;
export type Permission = (typeof permissions)[number];

const everything = new Set<Permission>(permissions);
const politicianOnly: Permission[] = [
  'team:manage',
  'webhooks:manage',
  'payments:manage',
  'audit:read',
  'channels:manage',
  'workspace:manage',
  'voter_fields:manage',
  'privacy:manage',
];

/** The permission matrix of the contract. */
export const rolePermissions: Record<Role, ReadonlySet<Permission>> = {
  politician: everything,
  manager: new Set(permissions.filter((p) => !politicianOnly.includes(p))),
  volunteer: new Set<Permission>([
    'authenticated',
    'voters:read',
    'voters:write',
    'grievances:read',
    'grievances:write',
    'conversations:handle',
    'field:work',
  ]),
};

export function can(role: Role, permission: Permission): boolean {
  return rolePermissions[role].has(permission);
}
