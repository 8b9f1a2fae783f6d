'use strict';
// ali-ons push consumer driver (clustering mode).
//
//   node ons_consumer.js --namesrv ADDR --group G --topic T [--expression 'TagA || TagB']
//        [--from first|last] [--fail-match TEXT] [--fail-until N] [--max-reconsume N]
//        [--rebalance-ms MS] [--timeout-ms MS] [--access-key AK --secret-key SK]
//
// Lines on stdout (JSON, one per line):
//   {"event":"ready","clientId":...,"queues":[0,1,...]}   first time queues of T are assigned
//   {"event":"queues","queues":[...]}                      whenever T's assignment changes
//   {"event":"recv","topic":..,"mqTopic":..,"tags":..,"keys":..,"body":..,"msgId":..,
//    "queueId":..,"queueOffset":..,"reconsumeTimes":..,"props":{..},"ts":ms,"action":"ok"|"fail"}
//   {"event":"error","error":...}                          non-fatal client errors
//   {"event":"closed"}                                     after a graceful close
// A message whose body contains --fail-match (every message if the option is "*") is failed
// (the handler throws) while its reconsumeTimes < --fail-until (default: always).
// Write "exit" on stdin (or close stdin) to close the consumer gracefully and exit 0.

const readline = require('readline');
const { loadOns, emit, parseArgs, dummyHttpclient, stderrLogger, exitAfter, die, credentials } = require('./ons_common');

async function main() {
  const args = parseArgs(process.argv.slice(2));
  exitAfter(Number(args['timeout-ms'] || 60000), 'consumer');
  const { Consumer } = loadOns();
  const topic = args.topic;
  const failMatch = args['fail-match'] === undefined ? null : String(args['fail-match']);
  const failUntil = args['fail-until'] === undefined ? Infinity : Number(args['fail-until']);
  const options = {
    consumerGroup: args.group,
    nameSrv: args.namesrv,
    httpclient: dummyHttpclient,
    clientIP: '127.0.0.1',
    logger: stderrLogger,
    consumeFromWhere: args.from === 'last' ? 'CONSUME_FROM_LAST_OFFSET' : 'CONSUME_FROM_FIRST_OFFSET',
    ...credentials(args),
  };
  if (args['max-reconsume'] !== undefined) options.maxReconsumeTimes = Number(args['max-reconsume']);
  if (args['rebalance-ms'] !== undefined) options.rebalanceInterval = Number(args['rebalance-ms']);
  const consumer = new Consumer(options);
  consumer.on('error', err => emit({ event: 'error', error: String(err && err.message || err) }));

  consumer.subscribe(topic, args.expression || '*', async (msg, mq) => {
    const fail = failMatch !== null &&
      (failMatch === '*' || msg.body.toString().includes(failMatch)) &&
      msg.reconsumeTimes < failUntil;
    emit({
      event: 'recv', topic: msg.topic, mqTopic: mq && mq.topic, tags: msg.tags || null,
      keys: msg.keys || null, body: msg.body.toString(), msgId: msg.msgId, queueId: msg.queueId,
      queueOffset: Number(msg.queueOffset), reconsumeTimes: msg.reconsumeTimes,
      props: msg.properties, ts: Date.now(), action: fail ? 'fail' : 'ok',
    });
    // Throw rather than return Consumer.ACTION_RETRY: ali-ons' handler wrapper for %RETRY%
    // messages drops the return value, so only a throw fails a message a second time.
    if (fail) throw new Error('failing on purpose: ' + msg.msgId);
  });

  await consumer.ready();

  // Assignment watcher: the first non-empty assignment of T is "ready"; later changes are "queues".
  let last = null;
  const watcher = setInterval(() => {
    const queues = [];
    for (const item of consumer.processQueueTable.values()) {
      if (item.messageQueue.topic === topic) queues.push(item.messageQueue.queueId);
    }
    queues.sort((a, b) => a - b);
    const key = queues.join(',');
    if (last === null) {
      if (queues.length) {
        emit({ event: 'ready', clientId: consumer._mqClient.clientId, queues });
        last = key;
      }
    } else if (key !== last) {
      emit({ event: 'queues', queues });
      last = key;
    }
  }, 50);

  let closing = false;
  async function close() {
    if (closing) return;
    closing = true;
    clearInterval(watcher);
    try {
      await consumer.close();
    } catch (err) {
      console.error('[close error]', err);
    }
    emit({ event: 'closed' });
    process.exit(0);
  }
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', line => { if (line.trim() === 'exit') close().catch(die); });
  rl.on('close', () => close().catch(die));
}

main().catch(die);
