'use strict';
// ali-ons producer driver.
//
//   node ons_producer.js --namesrv 127.0.0.1:9876 --group PG --spec '<json>' [--timeout-ms 30000]
//        [--access-key AK --secret-key SK]
//
// spec: {"messages": [{"topic": T, "body": "...", "tags": "TagA", "keys": ["k1", "k2"],
//         "shardingKey": "s", "delayLevel": 3, "props": {"name": "value"}}, ...]}
// Sends them one by one, in order. Prints per message
//   {"event":"sent","i":0,"msgId":...,"queueId":...,"queueOffset":...,"status":...,"ts":<ms>}
// or {"event":"send_error","i":0,"error":...}, then {"event":"done","sent":N,"failed":M}.
// Exit code 0 when every send succeeded, 1 otherwise.

const { loadOns, emit, parseArgs, dummyHttpclient, stderrLogger, exitAfter, die, credentials } = require('./ons_common');

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const spec = JSON.parse(args.spec);
  exitAfter(Number(args['timeout-ms'] || 30000), 'producer');
  const { Producer, Message } = loadOns();
  const producer = new Producer({
    producerGroup: args.group,
    nameSrv: args.namesrv,
    httpclient: dummyHttpclient,
    clientIP: '127.0.0.1',
    logger: stderrLogger,
    ...credentials(args),
  });
  producer.on('error', err => console.error('[producer error]', err));
  await producer.ready();
  let failed = 0;
  for (let i = 0; i < spec.messages.length; i++) {
    const m = spec.messages[i];
    const msg = m.tags ? new Message(m.topic, m.tags, m.body) : new Message(m.topic, m.body);
    if (m.keys) msg.keys = m.keys;
    if (m.shardingKey) msg.shardingKey = m.shardingKey;
    if (m.delayLevel) msg.delayTimeLevel = m.delayLevel;
    for (const [k, v] of Object.entries(m.props || {})) msg.properties[k] = v;
    const ts = Date.now();
    try {
      const r = await producer.send(msg);
      emit({
        event: 'sent', i, ts, topic: m.topic, status: r.sendStatus, msgId: r.msgId,
        queueId: r.messageQueue.queueId, queueOffset: r.queueOffset,
      });
    } catch (err) {
      failed++;
      emit({ event: 'send_error', i, ts, error: String(err && err.message || err) });
    }
  }
  emit({ event: 'done', sent: spec.messages.length - failed, failed });
  try {
    await producer.close();
  } catch (err) {
    console.error('[close error]', err);
  }
  // ali-ons' inner producer keeps timers alive; leave explicitly.
  process.exit(failed ? 1 : 0);
}

main().catch(die);
