import java.util.Calendar;

/**
 * Prints, for each millisecond timestamp given, the start of its month and of the next month as
 * java.util.Calendar computes them in the JVM's default time zone (-Duser.timezone=...): the
 * fields MessageClientIDSetter.setStartTime sets, then one MONTH added. One line per argument:
 * "start next". Run as a single source file: java MonthStart.java MS...
 */
public class MonthStart {
    public static void main(String[] args) {
        for (String arg : args) {
            Calendar cal = Calendar.getInstance();
            cal.setTimeInMillis(Long.parseLong(arg));
            cal.set(Calendar.DAY_OF_MONTH, 1);
            cal.set(Calendar.HOUR_OF_DAY, 0);
            cal.set(Calendar.MINUTE, 0);
            cal.set(Calendar.SECOND, 0);
            cal.set(Calendar.MILLISECOND, 0);
            long start = cal.getTimeInMillis();
            cal.add(Calendar.MONTH, 1);
            System.out.println(start + " " + cal.getTimeInMillis());
        }
    }
}
