import { createHmac } from 'node:crypto';
import { sameText } from '../../lib/crypto.ts';
import { SecretBox } from '../../lib/secret-box.ts';

/**
 * One-click unsubscribe links (RFC 8058). The link carries the workspace and the address sealed (AES-256-GCM)
 * under APP_KEY: it works without signing in, cannot be forged for another address, needs no table, and its
 * address cannot be read from it (a link in a log or a forwarded email reveals nothing). Links of the earlier
 * form (the address in base64 with an HMAC) still work.
 */
export const UNSUBSCRIBE_PATH = '/api/unsubscribe';

function signature(appKey: Buffer, payload: string): string {
  return createHmac('sha256', appKey).update(`list-unsubscribe\n${payload}`).digest('base64url');
}

const boxes = new WeakMap<Buffer, SecretBox>();
const boxOf = (appKey: Buffer) => {
  let box = boxes.get(appKey);
  if (!box) boxes.set(appKey, (box = new SecretBox(appKey, 'unsubscribe')));
  return box;
};

export function unsubscribeToken(appKey: Buffer, workspaceId: number, email: string): string {
  return boxOf(appKey).seal(`${workspaceId}:${email}`);
}

/** The workspace and address of a token sealed (or, earlier, signed) under APP_KEY; undefined otherwise. */
export function readUnsubscribeToken(
  appKey: Buffer,
  token: string,
): { workspaceId: number; email: string } | undefined {
  if (token.startsWith('v1.')) {
    const match = /^(\d{1,15}):(.+)$/s.exec(boxOf(appKey).openOr(token) ?? '');
    return match ? { workspaceId: Number(match[1]), email: match[2]! } : undefined;
  }
  const [payload, given, extra] = token.split('.');
  if (!payload || !given || extra !== undefined) return undefined;
  if (!sameText(signature(appKey, payload), given)) return undefined;
  const match = /^(\d{1,15}):(.+)$/s.exec(Buffer.from(payload, 'base64url').toString('utf8'));
  return match ? { workspaceId: Number(match[1]), email: match[2]! } : undefined;
}

/** The one-click unsubscribe URL of `email` in a workspace: POST opts out, GET shows a page with a button. */
export function unsubscribeUrl(appKey: Buffer, baseUrl: string, workspaceId: number, email: string): string {
  return `${baseUrl}${UNSUBSCRIBE_PATH}/${unsubscribeToken(appKey, workspaceId, email)}`;
}

/** The RFC 8058 headers of a campaign email, for its unsubscribe URL (the footer's, the same link). */
export function listUnsubscribeHeaders(url: string): Record<string, string> {
  return {
    'List-Unsubscribe': `<${url}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}

/** The visible footer every campaign email's body ends with: the same link, for a person to click. */
export function unsubscribeFooter(url: string): string {
  return `\n\n--\nTo stop receiving these emails, unsubscribe: ${url}`;
}
