// Takes a store's lock file the way RocketMQ's DefaultMessageStore.start does:
// FileChannel.tryLock(0, 1, false) on a RandomAccessFile opened "rw". Run as a single-file
// source program (java LockProbe.java FILE MODE) by tests/peers/rocketmq/test_store_lock.py.
//   MODE try:  print "locked" when someone else holds it, else "free" (and let go at once);
//   MODE hold: take it (or print "locked" and exit 1), print "held", keep it until a line on stdin.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.RandomAccessFile;
import java.nio.channels.FileLock;

public class LockProbe {
    public static void main(String[] args) throws Exception {
        try (RandomAccessFile file = new RandomAccessFile(args[0], "rw")) {
            FileLock lock = file.getChannel().tryLock(0, 1, false);
            if (lock == null) {
                System.out.println("locked");
                System.exit("try".equals(args[1]) ? 0 : 1);
            }
            if ("hold".equals(args[1])) {
                System.out.println("held");
                System.out.flush();
                new BufferedReader(new InputStreamReader(System.in)).readLine();
            } else {
                System.out.println("free");
            }
            lock.release();
        }
    }
}
