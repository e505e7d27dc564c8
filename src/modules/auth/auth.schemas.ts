import { Type } from 'typebox';
import { Credits } from '../credits/credits.schemas.ts';
import { Email, Name, Password, Phone, User } from '../users/users.schemas.ts';

export const AuthResult = Type.Object({
  user: User,
  access_token: Type.String({
    description: 'Send as `Authorization: Bearer <access_token>`. Shape `<id>|<secret>`.',
  }),
  token_type: Type.Literal('Bearer'),
  credits: Credits,
});

export const RegisterBody = Type.Object(
  {
    name: Name,
    email: Email,
    password: Password,
    phone: Type.Optional(Phone),
    workspace_name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Name of the campaign office; defaults to "<name>\'s campaign".',
      }),
    ),
  },
  { additionalProperties: false },
);

export const LoginBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);

export const SendOtpBody = Type.Object({ phone: Phone }, { additionalProperties: false });

export const SendOtpResult = Type.Object({
  expires_in: Type.Integer({ description: 'Seconds the code stays valid.' }),
});

export const VerifyOtpBody = Type.Object(
  {
    phone: Phone,
    otp: Type.String({ pattern: '^[0-9]+$', minLength: 1, maxLength: 10, description: 'The 6-digit code.' }),
  },
  { additionalProperties: false },
);

export const CurrentUser = Type.Object({ user: User, credits: Credits });
