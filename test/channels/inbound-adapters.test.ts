import { createHmac } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { MediaDownloadError } from '../../src/channels/channel.js';
import { inboundAdapters } from '../../src/channels/inbound-adapters.js';
import { GraphClient } from '../../src/channels/meta/graph-client.js';

// The adapters' own methods, on fixtures written out as Meta sends them: no database, no HTTP.
const graph = new GraphClient({ baseUrl: 'http://127.0.0.1:9', version: 'v23.0' });
afterAll(() => graph.close());
const adapters = inboundAdapters(graph);
const silent = { warn: () => undefined };

describe('WhatsApp Cloud inbound adapter', () => {
  const whatsapp = adapters.whatsapp_cloud!;
  const connection = {
    channel: 'whatsapp' as const,
    settings: { phone_number_id: '1066', business_account_id: '2077' },
  };

  it('reads a webhook into the neutral lists: messages, statuses, template reviews', () => {
    const body = {
      object: 'whatsapp_business_account',
      entry: [
        {
          id: '2077',
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: '15550783881', phone_number_id: '1066' },
                contacts: [{ profile: { name: 'Ada' }, wa_id: '15551234567' }],
                messages: [
                  {
                    from: '15551234567',
                    id: 'wamid.text',
                    timestamp: '1767225600',
                    type: 'text',
                    text: { body: 'Hello' },
                  },
                  {
                    from: '15551234567',
                    id: 'wamid.image',
                    timestamp: '1767225601',
                    type: 'image',
                    image: { id: 'media-1', mime_type: 'image/jpeg', caption: 'Look' },
                  },
                  {
                    from: '15551234567',
                    id: 'wamid.where',
                    timestamp: '1767225602',
                    type: 'location',
                    location: { latitude: '52.5', longitude: 13.4, name: 'Office' },
                  },
                ],
                statuses: [
                  { id: 'wamid.out1', status: 'delivered', timestamp: '1767225603' },
                  {
                    id: 'wamid.out2',
                    status: 'failed',
                    errors: [{ code: 131026, title: 'Message undeliverable' }],
                  },
                  { id: 'wamid.out3', status: 'deleted' },
                ],
              },
            },
            {
              field: 'message_template_status_update',
              value: {
                event: 'APPROVED',
                message_template_id: 987,
                message_template_name: 'order_ready',
                message_template_language: 'en_US',
                reason: 'NONE',
              },
            },
            {
              // A quality flag changes no status: not reported.
              field: 'message_template_status_update',
              value: {
                event: 'FLAGGED',
                message_template_id: 988,
                message_template_name: 'order_late',
                message_template_language: 'en_US',
                reason: 'NONE',
              },
            },
          ],
        },
      ],
    };
    const from = { phone: '+15551234567', name: 'Ada' };
    expect(whatsapp.parse(body, connection, silent)).toEqual({
      messages: [
        {
          providerMessageId: 'wamid.text',
          from,
          sentAt: new Date(1767225600_000),
          type: 'text',
          content: 'Hello',
          media: null,
        },
        {
          providerMessageId: 'wamid.image',
          from,
          sentAt: new Date(1767225601_000),
          type: 'image',
          content: 'Look',
          media: {
            providerMediaId: 'media-1',
            mimeType: 'image/jpeg',
            filename: null,
            kind: 'image',
          },
        },
        {
          providerMessageId: 'wamid.where',
          from,
          sentAt: new Date(1767225602_000),
          type: 'text',
          content: 'Location: Office (52.5, 13.4)',
          media: null,
        },
      ],
      statuses: [
        { providerMessageId: 'wamid.out1', status: 'delivered', reason: null },
        {
          providerMessageId: 'wamid.out2',
          status: 'failed',
          reason: '(#131026) Message undeliverable',
        },
      ],
      templates: [
        {
          providerTemplateId: '987',
          name: 'order_ready',
          language: 'en_US',
          status: 'approved',
          reason: null,
        },
      ],
    });
  });

  it('skips what is another number’s, and reads a non-WhatsApp body as nothing', () => {
    const other = {
      object: 'whatsapp_business_account',
      entry: [
        {
          id: '2077',
          changes: [
            {
              field: 'messages',
              value: {
                metadata: { phone_number_id: '9999' },
                messages: [{ from: '1555', id: 'wamid.x', type: 'text', text: { body: 'hi' } }],
              },
            },
          ],
        },
      ],
    };
    const empty = { messages: [], statuses: [], templates: [] };
    expect(whatsapp.parse(other, connection, silent)).toEqual(empty);
    expect(whatsapp.parse({ object: 'page', entry: [] }, connection, silent)).toEqual(empty);
    expect(whatsapp.parse('not an object', connection, silent)).toEqual(empty);
  });

  it('answers the handshake and checks the signature over the exact bytes', () => {
    const query = { 'hub.mode': 'subscribe', 'hub.verify_token': 'vt', 'hub.challenge': '42' };
    expect(whatsapp.handshake(query, 'vt')).toBe('42');
    expect(whatsapp.handshake(query, 'other')).toBeNull();
    expect(whatsapp.handshake({ ...query, 'hub.mode': 'unsubscribe' }, 'vt')).toBeNull();
    const body = Buffer.from('{"object":"whatsapp_business_account"}');
    const signature = `sha256=${createHmac('sha256', 'secret').update(body).digest('hex')}`;
    expect(whatsapp.isSigned(body, signature, 'secret')).toBe(true);
    expect(whatsapp.isSigned(Buffer.from(`${body.toString()} `), signature, 'secret')).toBe(false);
    expect(whatsapp.isSigned(body, undefined, 'secret')).toBe(false);
  });

  it('needs the token for files only, and refuses a file without one for good', async () => {
    const text = {
      providerMessageId: 'm',
      from: { phone: '+1', name: null },
      type: 'text' as const,
    };
    const media = { providerMediaId: 'media-1', mimeType: null, filename: null, kind: 'image' };
    expect(
      whatsapp.needsToken({
        messages: [{ ...text, content: 'hi', media: null }],
        statuses: [],
        templates: [],
      }),
    ).toBe(false);
    expect(
      whatsapp.needsToken({
        messages: [{ ...text, type: 'image', content: null, media }],
        statuses: [],
        templates: [],
      }),
    ).toBe(true);
    const refused = whatsapp.fetchMedia(media, {
      token: null,
      maxBytes: 1024,
      checkUrl: async () => undefined,
    });
    await expect(refused).rejects.toBeInstanceOf(MediaDownloadError);
    await expect(refused).rejects.toMatchObject({ final: true });
    expect('lookUpName' in whatsapp).toBe(false);
  });
});

describe('Messenger and Instagram inbound adapters', () => {
  it('read a Messenger webhook into messages, statuses and watermarks, echoes skipped', () => {
    const messenger = adapters.messenger!;
    const connection = { channel: 'messenger' as const, settings: { page_id: '555' } };
    const event = (e: Record<string, unknown>, sender = 'psid-1') => ({
      sender: { id: sender },
      recipient: { id: '555' },
      timestamp: 1767225600000,
      ...e,
    });
    const body = {
      object: 'page',
      entry: [
        {
          id: '555',
          time: 1767225600000,
          messaging: [
            event({ message: { mid: 'm_1', text: 'Hi there' } }),
            event({
              message: {
                mid: 'm_2',
                attachments: [{ type: 'image', payload: { url: 'https://cdn.example/a.jpg' } }],
              },
            }),
            event({ reaction: { mid: 'm_out', action: 'react', emoji: '👍' } }),
            event({ delivery: { mids: ['m_out'], watermark: 1767225500000 } }),
            event({ read: { watermark: 1767225550000 } }),
            event({ message: { mid: 'm_echo', text: 'ours', is_echo: true } }, '555'),
          ],
        },
        { id: '666', messaging: [event({ message: { mid: 'm_other', text: 'not ours' } })] },
      ],
    };
    const skipped: unknown[] = [];
    const content = messenger.parse(body, connection, { warn: (d) => skipped.push(d) });
    const from = { identity: 'psid-1', name: null };
    const sentAt = new Date(1767225600000);
    expect(content).toEqual({
      messages: [
        { providerMessageId: 'm_1', from, type: 'text', content: 'Hi there', media: null, sentAt },
        {
          providerMessageId: 'm_2',
          from,
          type: 'image',
          content: null,
          media: {
            url: 'https://cdn.example/a.jpg',
            mimeType: null,
            filename: null,
            kind: 'image',
          },
          sentAt,
        },
        {
          providerMessageId: 'reaction:m_out:psid-1:react:1767225600000',
          from,
          type: 'text',
          content: 'Reacted 👍 to a message',
          media: null,
          sentAt,
        },
      ],
      statuses: [{ providerMessageId: 'm_out', status: 'delivered', reason: null }],
      templates: [],
      watermarks: [{ identity: 'psid-1', status: 'read', upTo: { at: new Date(1767225550000) } }],
    });
    expect(skipped).toEqual([{ entry: '666' }]);
    expect(messenger.looseReports).toBe(true);
    expect(messenger.needsToken(content)).toBe(true);
  });

  it('read an Instagram webhook by the professional account’s id, a read by message id', () => {
    const instagram = adapters.instagram!;
    const connection = {
      channel: 'instagram' as const,
      settings: { page_id: '555', instagram_account_id: '1784' },
    };
    const body = {
      object: 'instagram',
      entry: [
        {
          id: '1784',
          messaging: [
            { sender: { id: 'igsid-1' }, recipient: { id: '1784' }, read: { mid: 'm_out' } },
          ],
        },
      ],
    };
    expect(instagram.parse(body, connection, silent)).toEqual({
      messages: [],
      statuses: [],
      templates: [],
      watermarks: [{ identity: 'igsid-1', status: 'read', upTo: { providerMessageId: 'm_out' } }],
    });
    // A Messenger body is not Instagram's.
    expect(instagram.parse({ ...body, object: 'page' }, connection, silent).watermarks).toEqual([]);
  });
});
