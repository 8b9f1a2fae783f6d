'use strict';
// ali-ons producer that keeps sending through a failover (tests/failover/test_foreign_clients.py).
//
//   node ons_keep_sending.js --namesrv ADDR --topic T [--key-prefix o] [--pace-ms 10]
//        [--poll-ms 1000] [--timeout-ms 60000] [--group PG]
//
// Sends messages with unique keys and bodies (`<prefix>-<i>`) one at a time, `--pace-ms` apart,
// until a line (or the end of input) arrives on stdin, or the deadline. Every send that returns is
// printed: {"event":"sent","key":..,"status":..,"msgId":..,"queueId":..,"queueOffset":..,"ts":..,
// "ms":..} (msgId is the broker's offset id: its first 8 hex digits are the storing broker's IPv4
// address), or {"event":"send_error","key":..,"error":..} once ali-ons' own retries
// (retryTimesWhenSendFailed, 3 by default, inside sendMsgTimeout + 1 s) are spent; either way the
// loop goes on, as an application would. `--poll-ms` is ali-ons' `pollNameServerInteval` (sic: the
// option's spelling), how often it reads the topic's route again. Ends with {"event":"done"}.

const readline = require('readline');
const { loadOns, emit, parseArgs, dummyHttpclient, stderrLogger, exitAfter, die } = require('./ons_common');

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timeoutMs = Number(args['timeout-ms'] || 60000);
  exitAfter(timeoutMs + 10000, 'keep-sending');
  const deadline = Date.now() + timeoutMs;
  const pace = Number(args['pace-ms'] || 10);
  const prefix = String(args['key-prefix'] || 'o');
  const { Producer, Message } = loadOns();
  const producer = new Producer({
    producerGroup: String(args.group || 'ons_keep_sending_pg'),
    nameSrv: args.namesrv,
    httpclient: dummyHttpclient,
    clientIP: '127.0.0.1',
    logger: stderrLogger,
    pollNameServerInteval: Number(args['poll-ms'] || 30000),
  });
  producer.on('error', err => console.error('[producer error]', err));
  let stop = false;
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', () => { stop = true; });
  rl.on('close', () => { stop = true; });
  await producer.ready();
  emit({ event: 'ready' });
  for (let i = 0; !stop && Date.now() < deadline; i++) {
    const key = `${prefix}-${i}`;
    const msg = new Message(String(args.topic), 'F', key);
    msg.keys = [key];
    const ts = Date.now();
    try {
      const r = await producer.send(msg);
      emit({
        event: 'sent', key, ts, ms: Date.now() - ts, status: r.sendStatus, msgId: r.msgId,
        queueId: r.messageQueue.queueId, queueOffset: r.queueOffset,
      });
    } catch (err) {
      emit({ event: 'send_error', key, ts, ms: Date.now() - ts, error: String(err && err.message || err) });
    }
    await new Promise(resolve => setTimeout(resolve, pace));
  }
  emit({ event: 'done' });
  try {
    await producer.close();
  } catch (err) {
    console.error('[close error]', err);
  }
  process.exit(0);  // ali-ons' timers keep the loop alive
}

main().catch(die);
