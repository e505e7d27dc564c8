import { nowIso } from '../../db/connect.ts';
import type { Executor } from '../../db/types.ts';
import { enabledWebhooks, insertDeliveries, insertEvent } from './webhooks.repository.ts';
import { recordLive } from '../events/live.ts';

/**
 * The events an endpoint can subscribe to, and what `data` carries on the wire (the body is
 * `{ type, timestamp, data }`, `timestamp` being when the event happened):
 *
 * - `message.delivered`, `message.failed`: the message as GET /api/messages/history shows it
 *   (`{ id: "msg_<n>", channel, to, message, status, sent_at, created_at, campaign_id }`, `campaign_id` null for a
 *   single send), emitted in the transaction that moves the message to that status. Messages a
 *   campaign cancel stops (they end `failed` with the error `cancelled`) emit no event.
 * - `grievance.created`: the grievance as GET /api/grievances/{id} shows it.
 * - `grievance.resolved`: the grievance, on every move to `resolved` (a reopened one resolves again).
 * - `payment.processed`: `{ payment, credits }`: the payment and the workspace's balance after it.
 * - `message.received`: a reply, as GET /api/messages/inbound shows it
 *   (`{ id: "in_<n>", channel, from, body, keyword, created_at }`).
 * - `channel_account.failed`: a provider refused a channel account's credentials and the account was switched
 *   off (`{ id: "cha_<n>", name, provider, error_code: "auth_failed", error_message, failed_at }`).
 * - `conversation.created`: a contact wrote for the first time (the conversation as GET /api/conversations/{id}
 *   shows it); `conversation.assigned`: a conversation was assigned (on arrival, or by PATCH).
 *
 * - `survey.response.completed`: a survey response that answered every question, as GET
 *   /api/surveys/{id}/responses shows it (`{ id: "sres_<n>", survey_id, run_id, voter_id, address, channel,
 *   status, answers, started_at, completed_at }`).
 *
 * - `privacy_request.due_soon`: a data-principal request still open 7 days before its `due_at`, as
 *   GET /api/privacy/requests/{id} shows it (once per request).
 *
 * Plus `ping`, sent only by POST /api/webhooks/{id}/test and only to that endpoint.
 */
export const webhookEventTypes = [
  'message.delivered',
  'message.failed',
  'grievance.created',
  'grievance.resolved',
  'payment.processed',
  'message.received',
  'channel_account.failed',
  'conversation.created',
  'conversation.assigned',
  'survey.response.completed',
  'privacy_request.due_soon',
] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];

/**
 * Writes an event to the outbox with one pending delivery per enabled endpoint of the workspace that
 * subscribes to it, in the caller's transaction: the event exists if and only if the change that caused
 * it commits, and the delivery workers send it from there (a crash loses none). When no endpoint
 * subscribes, nothing is written and null is returned; otherwise the event's id.
 */
export async function emitEvent(
  trx: Executor,
  workspaceId: number,
  type: WebhookEventType,
  data: unknown,
  now: string = nowIso(),
  /** Conversation and grievance events: the assignee (a volunteer's live stream carries only theirs). */
  live?: { assignedTo: number | null },
): Promise<number | null> {
  await recordLive(trx, workspaceId, type, data, live?.assignedTo ?? null, now);
  const subscribed = (await enabledWebhooks(trx, workspaceId))
    .filter((hook) => (JSON.parse(hook.events) as string[]).includes(type))
    .map((hook) => hook.id);
  if (subscribed.length === 0) return null;
  const eventId = await insertEvent(trx, workspaceId, type, JSON.stringify(data), now);
  await insertDeliveries(trx, workspaceId, eventId, subscribed, now);
  return eventId;
}

/**
 * Many events of one type in one workspace (a batch of messages settling), in the caller's transaction:
 * the subscribed endpoints are looked up once, and nothing at all is written when none subscribes.
 */
export async function emitEvents(
  trx: Executor,
  workspaceId: number,
  type: WebhookEventType,
  data: readonly unknown[],
  now: string = nowIso(),
): Promise<void> {
  if (data.length === 0) return;
  const subscribed = (await enabledWebhooks(trx, workspaceId))
    .filter((hook) => (JSON.parse(hook.events) as string[]).includes(type))
    .map((hook) => hook.id);
  if (subscribed.length === 0) return;
  for (const item of data) {
    const eventId = await insertEvent(trx, workspaceId, type, JSON.stringify(item), now);
    await insertDeliveries(trx, workspaceId, eventId, subscribed, now);
  }
}

/** A `ping` to one endpoint (the test route), whatever it subscribes to. */
export async function emitPing(
  trx: Executor,
  workspaceId: number,
  webhookId: number,
  now: string = nowIso(),
): Promise<{ eventId: number; deliveryId: number }> {
  const data = { webhook_id: webhookId, message: 'A test event from the Campaign Engagement Service.' };
  const eventId = await insertEvent(trx, workspaceId, 'ping', JSON.stringify(data), now);
  const [deliveryId] = await insertDeliveries(trx, workspaceId, eventId, [webhookId], now);
  return { eventId, deliveryId: deliveryId! };
}

/** The `webhook-id` of an event: the same on every attempt and every endpoint, for deduplication. */
export function eventMessageId(eventId: number): string {
  return `evt_${eventId}`;
}
