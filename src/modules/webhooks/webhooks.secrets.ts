import { randomBytes } from 'node:crypto';
import { SecretBox } from '../../lib/secret-box.ts';

/** A new signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks form). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Seals and opens webhook secrets under a key derived from APP_KEY for this purpose only. */
export function webhookSecretBox(appKey: Buffer): SecretBox {
  return new SecretBox(appKey, 'webhook-secret');
}
