import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Encrypts short secrets for storage (AES-256-GCM, a random 12-byte IV each time) under a key derived from
 * APP_KEY with HKDF-SHA256 and a purpose label, so one APP_KEY yields independent keys per use. The stored
 * text is `v1.<iv>.<tag>.<ciphertext>` in base64url; a database dump without APP_KEY reveals nothing.
 */
/** A sealed secret this key cannot open: it was sealed under another APP_KEY, or altered. */
export class SealedSecretError extends Error {
  constructor() {
    super('the secret was sealed under another APP_KEY, or altered');
    this.name = 'SealedSecretError';
  }
}

export class SecretBox {
  private readonly key: Buffer;

  constructor(appKey: Buffer, purpose: string) {
    this.key = Buffer.from(hkdfSync('sha256', appKey, Buffer.alloc(0), `ces:${purpose}`, 32));
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return ['v1', iv, cipher.getAuthTag(), body]
      .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
      .join('.');
  }

  /** Throws SealedSecretError when the text was not sealed under this key (another APP_KEY) or was altered. */
  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined) throw new SealedSecretError();
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      // Every failure here is the key's or the text's: a wrong tag, a bad IV length, a truncated text.
      throw new SealedSecretError();
    }
  }

  /** The opened text, or undefined when it was sealed under another key (or altered). */
  openOr(sealed: string): string | undefined {
    try {
      return this.open(sealed);
    } catch (error) {
      if (error instanceof SealedSecretError) return undefined;
      throw error;
    }
  }
}
