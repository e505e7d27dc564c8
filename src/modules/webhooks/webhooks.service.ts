import type { Kysely } from 'kysely';
import type { WebhookSettings } from '../../config.ts';
import { nowIso } from '../../db/connect.ts';
import type { Database, WebhookRow } from '../../db/schema.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import { emitPing, eventMessageId, webhookEventTypes } from './webhooks.events.ts';
import {
  deleteWebhook,
  type DeliveryLogRow,
  findDelivery,
  findWebhook,
  insertWebhook,
  listDeliveries,
  listWebhooks,
  requeueDelivery,
  updateWebhook,
} from './webhooks.repository.ts';
import { newWebhookSecret, webhookSecretBox } from './webhooks.secrets.ts';
import { BlockedUrlError, checkDestination, parseWebhookUrl, type Resolver } from './webhooks.ssrf.ts';

export function webhookView(row: WebhookRow) {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    description: row.description,
    active: row.disabled_at === null,
    disabled_reason: row.disabled_reason,
    paused_until: row.paused_until,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function deliveryView(row: DeliveryLogRow) {
  return {
    id: row.id,
    event_id: eventMessageId(row.event_id),
    event_type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    last_attempt_at: row.last_attempt_at,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at : null,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface WebhookInput {
  url?: string | undefined;
  events?: string[] | undefined;
  description?: string | null | undefined;
  active?: boolean | undefined;
}

export class WebhooksService {
  private readonly secrets: SecretBox;

  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      appKey: Buffer;
      settings: Pick<WebhookSettings, 'allowPrivateUrls'>;
      resolver: Resolver;
    },
  ) {
    this.secrets = webhookSecretBox(deps.appKey);
  }

  /** The URL's form, and unless private URLs are allowed, where its host resolves to (422 otherwise). */
  private async checkUrl(raw: string): Promise<string> {
    const url = parseWebhookUrl(raw.trim());
    if (typeof url === 'string') throw validationError({ url: [url] });
    if (!this.deps.settings.allowPrivateUrls) {
      try {
        await checkDestination(url, this.deps.resolver);
      } catch (error) {
        if (error instanceof BlockedUrlError) {
          throw validationError({ url: [`must reach a public address: ${error.message}`] });
        }
        throw error;
      }
    }
    return url.toString();
  }

  async create(workspaceId: number, input: WebhookInput, actor: AuditActor) {
    const url = await this.checkUrl(input.url ?? '');
    const secret = newWebhookSecret();
    const now = nowIso();
    const row = await this.deps.db.transaction().execute(async (trx) => {
      const row = await insertWebhook(trx, {
        workspace_id: workspaceId,
        url,
        description: input.description?.trim() || null,
        events: JSON.stringify(input.events ?? [...webhookEventTypes]),
        secret_encrypted: this.secrets.seal(secret),
        disabled_at: null,
        disabled_reason: null,
        created_at: now,
        updated_at: now,
      });
      await recordAudit(trx, { workspaceId, actor, action: 'webhook.created', ...auditOf(row) });
      return row;
    });
    return { ...webhookView(row), secret };
  }

  async get(workspaceId: number, id: number) {
    const row = await findWebhook(this.deps.db, workspaceId, id);
    if (!row) throw notFound('Webhook');
    return webhookView(row);
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await listWebhooks(this.deps.db, workspaceId, page, perPage);
    return pageResult(rows.map(webhookView), total, page, perPage);
  }

  async update(workspaceId: number, id: number, input: WebhookInput, actor: AuditActor) {
    const url = input.url !== undefined ? await this.checkUrl(input.url) : undefined;
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const current = await findWebhook(trx, workspaceId, id);
      if (!current) throw notFound('Webhook');
      const enable = input.active === true && current.disabled_at !== null;
      const disable = input.active === false && current.disabled_at === null;
      const row = await updateWebhook(trx, workspaceId, id, {
        ...(url !== undefined ? { url } : {}),
        ...(input.events !== undefined ? { events: JSON.stringify(input.events) } : {}),
        ...(input.description !== undefined ? { description: input.description?.trim() || null } : {}),
        ...(input.active === true ? { paused_until: null, timeout_streak: 0 } : {}),
        ...(enable ? { disabled_at: null, disabled_reason: null } : {}),
        ...(disable ? { disabled_at: now, disabled_reason: 'turned off through the API' } : {}),
        updated_at: now,
      });
      if (!row) throw notFound('Webhook');
      await recordAudit(trx, { workspaceId, actor, action: 'webhook.updated', ...auditOf(row) });
      return webhookView(row);
    });
  }

  async remove(workspaceId: number, id: number, actor: AuditActor): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      if (!(await deleteWebhook(trx, workspaceId, id))) throw notFound('Webhook');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'webhook.deleted',
        target: { type: 'webhook', id },
      });
    });
  }

  async deliveries(workspaceId: number, webhookId: number, page: number, perPage: number) {
    const { db } = this.deps;
    if (!(await findWebhook(db, workspaceId, webhookId))) throw notFound('Webhook');
    const { rows, total } = await listDeliveries(db, workspaceId, webhookId, page, perPage);
    return pageResult(rows.map(deliveryView), total, page, perPage);
  }

  /** Sends a delivery again: it becomes due now; the attempt counter goes on from where it stood. */
  async retry(workspaceId: number, webhookId: number, deliveryId: number) {
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const hook = await findWebhook(trx, workspaceId, webhookId);
      if (!hook) throw notFound('Webhook');
      const delivery = await findDelivery(trx, workspaceId, webhookId, deliveryId);
      if (!delivery) throw notFound('Delivery');
      if (hook.disabled_at !== null) {
        throw new AppError('conflict', 'The webhook is disabled: enable it (PATCH active=true) first.');
      }
      if (delivery.status === 'pending' && delivery.lease_until !== null && delivery.lease_until > now) {
        throw new AppError('conflict', 'The delivery is being attempted right now.');
      }
      await requeueDelivery(trx, workspaceId, deliveryId, now);
      const updated = await findDelivery(trx, workspaceId, webhookId, deliveryId);
      return deliveryView(updated!);
    });
  }

  /** Queues a `ping` event for this endpoint only. */
  async test(workspaceId: number, webhookId: number) {
    return this.deps.db.transaction().execute(async (trx) => {
      const hook = await findWebhook(trx, workspaceId, webhookId);
      if (!hook) throw notFound('Webhook');
      if (hook.disabled_at !== null) {
        throw new AppError('conflict', 'The webhook is disabled: enable it (PATCH active=true) first.');
      }
      const { eventId, deliveryId } = await emitPing(trx, workspaceId, webhookId);
      return { event_id: eventMessageId(eventId), delivery_id: deliveryId, status: 'pending' as const };
    });
  }
}

/** The audit log's target and details of a webhook action: never its secret, nor the URL's query (it may hold a token). */
function auditOf(row: WebhookRow) {
  const { origin, pathname } = new URL(row.url);
  const details = {
    url: `${origin}${pathname}`,
    events: JSON.parse(row.events) as unknown,
    active: row.disabled_at === null,
  };
  return { target: { type: 'webhook', id: row.id }, details };
}
