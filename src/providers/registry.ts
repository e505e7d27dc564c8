import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { channels, type Channel, type MessageProvider, type Providers } from './provider.ts';
import { SandboxProvider } from './sandbox.ts';
import { SmtpProvider } from './smtp.ts';
import { TwilioProvider } from './twilio.ts';

/** The provider of each channel, as the SMS_PROVIDER / WHATSAPP_PROVIDER / ... settings choose. */
export function createProviders(
  config: Pick<Config, 'providers' | 'sandboxDeliveryDelayMs' | 'twilio' | 'smtp' | 'delivery'>,
  log: FastifyBaseLogger,
): Providers {
  const make = (channel: Channel): MessageProvider => {
    switch (config.providers[channel]) {
      case 'sandbox':
        return new SandboxProvider(channel, log, config.sandboxDeliveryDelayMs);
      case 'twilio':
        if (!config.twilio || channel === 'email') throw new Error(`twilio cannot send ${channel}`);
        return new TwilioProvider(channel, config.twilio);
      case 'smtp':
        if (!config.smtp || channel !== 'email') throw new Error(`smtp cannot send ${channel}`);
        return new SmtpProvider(config.smtp, config.delivery.providerTimeoutMs);
    }
  };
  return Object.fromEntries(channels.map((c) => [c, make(c)])) as Record<Channel, MessageProvider>;
}
