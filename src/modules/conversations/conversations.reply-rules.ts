import type { Kysely } from 'kysely';
import type { ConversationRow, Database } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import { validationError } from '../../errors.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { adapterNamed } from '../../providers/registry.ts';
import { channelCarrier } from '../channel-accounts/channel-accounts.service.ts';
import { fittingTemplates } from '../templates/templates.service.ts';
import { templateRef } from '../../refs.ts';

/** How a reply on a conversation may go (contract, fifth part, "Replies"): free text, or a template only. */

/** WhatsApp's customer service window: free text only this long after the contact last wrote. */
const WHATSAPP_WINDOW_MS = 24 * 3600 * 1000;

export interface ReplyDeps {
  db: Kysely<Database>;
  /** The deployment's provider of each channel (where the workspace has no account for it). */
  deployment: Record<MessageChannel, string>;
  dltEnforce: boolean;
}

/**
 * Free text where the gateway sends templates only (contract, fifth part, "Replies"): SMS through a DLT gateway or
 * under DLT_ENFORCE, and WhatsApp more than 24 hours after the contact last wrote. 422 on `message`, naming
 * the workspace's templates that fit.
 */
export async function refuseFreeText(
  deps: ReplyDeps,
  row: ConversationRow,
  accountId: number | undefined,
): Promise<void> {
  const { reason, provider, fit } = await replyRules(deps, row, accountId);
  if (reason === null) return;
  const { dltEnforce } = deps;
  const adapter = adapterNamed(provider);
  const named = fit.length
    ? `Templates that fit: ${fit
        .slice(0, 10)
        .map((t) => `${templateRef(t.id)} ("${t.name}")`)
        .join(', ')}${fit.length > 10 ? `, and ${fit.length - 10} more` : ''}.`
    : `No template of this workspace fits yet: add one (POST /api/templates) with ${adapter.templates ? `provider_template_ids.${provider}` : 'its dlt_template_id and sender_id'}.`;
  const why =
    reason === 'whatsapp_window'
      ? "the contact last wrote more than 24 hours ago, outside WhatsApp's customer service window: reply with an approved template"
      : `${adapter.label} sends SMS only as DLT-registered templates${dltEnforce && !adapter.templatesOnly?.includes('sms') ? ' (DLT_ENFORCE)' : ''}: reply with a template`;
  throw validationError({
    message: [`cannot be free text: ${why} ({ "template_id": "tpl_<n>", "variables": { ... } }). ${named}`],
  });
}

/** How a reply on the conversation can go now: the provider, whether it must be a template, and what fits. */
export async function replyRules(deps: ReplyDeps, row: ConversationRow, accountId: number | undefined) {
  const { db, deployment, dltEnforce } = deps;
  const channel = row.channel;
  const account =
    accountId !== undefined
      ? await db
          .selectFrom('channel_accounts')
          .select('provider')
          .where('id', '=', accountId)
          .executeTakeFirst()
      : (await channelCarrier(db, row.workspace_id, channel)).account;
  const provider = account?.provider ?? deployment[channel];
  const windowShut =
    channel === 'whatsapp' &&
    (row.last_inbound_at === null || Date.now() - Date.parse(row.last_inbound_at) > WHATSAPP_WINDOW_MS);
  const dlt = channel === 'sms' && sendsTemplatesOnly(adapterNamed(provider), 'sms', dltEnforce);
  const reason = windowShut ? ('whatsapp_window' as const) : dlt ? ('dlt' as const) : null;
  const fit =
    channel === 'sms' || channel === 'whatsapp'
      ? await fittingTemplates(db, row.workspace_id, channel, provider, dltEnforce)
      : [];
  return { reason, provider, fit };
}
