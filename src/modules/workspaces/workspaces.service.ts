// The caller's workspace: what it answers (its zone, what carries each channel) and the changes a politician makes.
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { messageChannels, type MessageChannel } from '../../domain.ts';
import { type FieldErrors, notFound, validationError } from '../../errors.ts';
import { isTimeZone } from '../../lib/quiet-hours.ts';
import { adapterNamed, isSimulated } from '../../providers/registry.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { accountsOfWorkspace } from '../channel-accounts/channel-accounts.repository.ts';
import { carrierAmong } from '../channel-accounts/channel-accounts.service.ts';
import { givePublicId, updateWorkspace, workspaceById } from './workspaces.repository.ts';
import { accountRef } from '../../refs.ts';

/** What a workspace may keep for a number of days (null: forever); the retention chore deletes older rows. */
export const retentionKeys = [
  'messages_days',
  'inbound_days',
  'visits_days',
  'survey_responses_days',
] as const;
export type RetentionKey = (typeof retentionKeys)[number];

export interface ChannelCarrier {
  provider: string;
  channel_account_id: string | null;
  simulated: boolean;
  active: boolean;
  templates_only: boolean;
}

export class WorkspacesService {
  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      /** The deployment's provider of each channel (its name), for channels the workspace has no account for. */
      deployment: Record<MessageChannel, string>;
      /** QUIET_HOURS_TZ: the zone of a workspace that sets none. */
      defaultTimeZone: string;
      /** DLT_ENFORCE: every SMS is a registered template. */
      dltEnforce: boolean;
    },
  ) {}

  /** The workspace as the API answers it: one read of it and one of its accounts. */
  async view(workspaceId: number) {
    const { db, deployment, defaultTimeZone } = this.deps;
    const row = await workspaceById(db, workspaceId);
    if (!row) throw notFound('Workspace');
    const channels = {} as Record<MessageChannel, ChannelCarrier>;
    const accounts = await accountsOfWorkspace(db, workspaceId);
    for (const channel of messageChannels) {
      const { account, off } = carrierAmong(accounts, channel);
      const carrier = account ?? off;
      const provider = carrier ? carrier.provider : deployment[channel];
      channels[channel] = {
        provider,
        channel_account_id: carrier ? accountRef(carrier.id) : null,
        simulated: isSimulated(provider) && !off,
        active: off === undefined,
        templates_only: sendsTemplatesOnly(adapterNamed(provider), channel, this.deps.dltEnforce),
      };
    }
    return {
      id: Number(row.id),
      name: row.name,
      created_at: row.created_at,
      timezone: row.timezone ?? defaultTimeZone,
      timezone_set: row.timezone !== null,
      default_language: (row.default_language === 'hi' ? 'hi' : 'en') as 'en' | 'hi',
      public_id: row.public_id ?? (await givePublicId(db, workspaceId)),
      retention: {
        messages_days: row.retention_messages_days,
        inbound_days: row.retention_inbound_days,
        visits_days: row.retention_visits_days,
        survey_responses_days: row.retention_survey_responses_days,
      },
      channels,
    };
  }

  /** A new name or time zone (null: the deployment's), audited; 422 names what to fix. */
  async change(
    workspaceId: number,
    actor: AuditActor,
    body: {
      name?: string | undefined;
      timezone?: string | null | undefined;
      default_language?: 'en' | 'hi' | undefined;
      retention?: Partial<Record<RetentionKey, number | null>> | undefined;
    },
  ) {
    const { name, timezone, default_language: language, retention } = body;
    const errors: FieldErrors = {};
    if (name !== undefined && name.trim() === '') errors.name = ['must not be empty.'];
    if (typeof timezone === 'string' && !isTimeZone(timezone))
      errors.timezone = [`is "${timezone}", not an IANA time zone: use a name such as Asia/Kolkata.`];
    if (Object.keys(errors).length > 0) throw validationError(errors);
    await this.deps.db.transaction().execute(async (trx) => {
      await updateWorkspace(trx, workspaceId, {
        ...(name !== undefined ? { name: name.trim() } : {}),
        ...(timezone !== undefined ? { timezone } : {}),
        ...(language !== undefined ? { default_language: language } : {}),
        ...Object.fromEntries(
          Object.entries(retention ?? {}).map(([key, days]) => [`retention_${key}`, days ?? null]),
        ),
      });
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'workspace.updated',
        target: { type: 'workspace', id: workspaceId },
        details: {
          changed: Object.keys(body),
          ...(timezone !== undefined ? { timezone } : {}),
          ...(language !== undefined ? { default_language: language } : {}),
          ...(retention !== undefined ? { retention } : {}),
        },
      });
    });
    return this.view(workspaceId);
  }
}
