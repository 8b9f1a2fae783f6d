package rocketlite.peers;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.remoting.protocol.body.AclInfo;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.UserInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The dashboard's ACL page (2.1 line, ACL 2.0): its AclServiceImpl, call by call, through MQAdminExt.
 *
 * <p>Every method first resolves the brokers it works on as the service's getBrokerAddressList does:
 * examineBrokerClusterInfo, then every address (master and slaves) of the named broker, or, with no
 * broker named, of every broker of the named cluster (no cluster either: refused). Then, per address:
 * <ul>
 * <li>acl.listUsers: listUser(addr, "") (AUTH_LIST_USER); the users every broker has;
 * <li>acl.listAcls: listAcl(addr, search, "") and listAcl(addr, "", search) (AUTH_LIST_ACL), merged
 *     and made unique per broker; the ACLs every broker has (none if one broker has none);
 * <li>acl.createUser / acl.updateUser: createUser / updateUser(addr, UserInfo) with the page's
 *     username, password, userType and userStatus (AUTH_CREATE_USER, AUTH_UPDATE_USER);
 * <li>acl.deleteUser: deleteUser(addr, username) (AUTH_DELETE_USER);
 * <li>acl.createAcl / acl.updateAcl: for each policy, each entry and each resource of the entry, one
 *     createAcl / updateAcl(addr, AclInfo) whose single policy has a single entry (AUTH_CREATE_ACL,
 *     AUTH_UPDATE_ACL): the broker merges them into the subject's ACL;
 * <li>acl.deleteAcl: deleteAcl(addr, subject, resource or "") (AUTH_DELETE_ACL).
 * </ul>
 * The writes answer the addresses they went to and how many requests they sent.
 */
final class AclPage {
    private final DefaultMQAdminExt admin;

    AclPage(DefaultMQAdminExt admin) {
        this.admin = admin;
    }

    Object dispatch(String call, JSONObject a) throws Exception {
        String cluster = a.getString("clusterName");
        String broker = a.getString("brokerName");
        switch (call) {
            case "acl.listUsers": return listUsers(cluster, broker);
            case "acl.listAcls": return listAcls(cluster, broker, a.getString("searchParam"));
            case "acl.createUser": return eachBroker(cluster, broker, addr -> admin.createUser(addr, user(a)));
            case "acl.updateUser": return eachBroker(cluster, broker, addr -> admin.updateUser(addr, user(a)));
            case "acl.deleteUser":
                return eachBroker(cluster, broker, addr -> admin.deleteUser(addr, a.getString("username")));
            case "acl.createAcl": return putAcl(a, true);
            case "acl.updateAcl": return putAcl(a, false);
            case "acl.deleteAcl": {
                String resource = a.getString("resource");
                return eachBroker(cluster, broker,
                    addr -> admin.deleteAcl(addr, a.getString("subject"), resource != null ? resource : ""));
            }
            default: throw new IllegalArgumentException("unknown call " + call);
        }
    }

    private interface BrokerCall {
        void run(String addr) throws Exception;
    }

    private Object eachBroker(String cluster, String broker, BrokerCall call) throws Exception {
        List<String> addrs = brokerAddrs(cluster, broker);
        for (String addr : addrs) {
            call.run(addr);
        }
        return DashboardDriver.map("brokerAddrs", addrs, "requests", addrs.size());
    }

    private List<String> brokerAddrs(String cluster, String broker) throws Exception {
        ClusterInfo info = admin.examineBrokerClusterInfo();
        Set<String> names;
        if (broker != null) {
            names = DashboardDriver.brokerNames(info, List.of(), List.of(broker));
        } else {
            if (cluster == null || cluster.isEmpty()) {
                throw new IllegalArgumentException("Cluster name cannot be null or empty.");
            }
            names = DashboardDriver.brokerNames(info, List.of(cluster), List.of());
        }
        List<String> addrs = new ArrayList<>();
        for (String name : names) {
            addrs.addAll(info.getBrokerAddrTable().get(name).getBrokerAddrs().values());
        }
        return addrs;
    }

    private static UserInfo user(JSONObject a) {
        UserInfo u = new UserInfo();
        u.setUsername(a.getString("username"));
        u.setPassword(a.getString("password"));
        u.setUserStatus(a.getString("userStatus"));
        u.setUserType(a.getString("userType"));
        return u;
    }

    private Object listUsers(String cluster, String broker) throws Exception {
        Set<String> common = null;
        for (String addr : brokerAddrs(cluster, broker)) {
            List<UserInfo> users = admin.listUser(addr, ""); // null with no users: the service fails then too
            Set<String> here = new LinkedHashSet<>();
            for (UserInfo u : users) {
                here.add(JSON.toJSONString(DashboardDriver.map("username", u.getUsername(), "password",
                    u.getPassword(), "userType", u.getUserType(), "userStatus", u.getUserStatus())));
            }
            if (here.isEmpty()) {
                continue; // the service skips a broker without users
            }
            if (common == null) {
                common = here;
            } else {
                common.retainAll(here);
            }
        }
        return parsedSorted(common);
    }

    private Object listAcls(String cluster, String broker, String search) throws Exception {
        String s = search != null ? search : "";
        Set<String> common = null;
        for (String addr : brokerAddrs(cluster, broker)) {
            Set<String> here = new LinkedHashSet<>();
            // an empty list comes back as no body, which the client decodes as null (as from RocketMQ)
            for (List<AclInfo> part : Arrays.asList(admin.listAcl(addr, s, ""), admin.listAcl(addr, "", s))) {
                if (part != null) {
                    part.forEach(acl -> here.add(JSON.toJSONString(acl(acl))));
                }
            }
            if (common == null) {
                common = here;
            } else if (here.isEmpty()) {
                common.clear();
            } else {
                common.retainAll(here);
            }
        }
        return parsedSorted(common);
    }

    private static Map<String, Object> acl(AclInfo acl) {
        List<Object> policies = new ArrayList<>();
        if (acl.getPolicies() != null) {
            for (AclInfo.PolicyInfo p : acl.getPolicies()) {
                List<Object> entries = new ArrayList<>();
                if (p.getEntries() != null) {
                    for (AclInfo.PolicyEntryInfo e : p.getEntries()) {
                        entries.add(DashboardDriver.map("resource", e.getResource(), "actions", e.getActions(),
                            "sourceIps", e.getSourceIps(), "decision", e.getDecision()));
                    }
                }
                policies.add(DashboardDriver.map("policyType", p.getPolicyType(), "entries", entries));
            }
        }
        return DashboardDriver.map("subject", acl.getSubject(), "policies", policies);
    }

    private static List<Object> parsedSorted(Set<String> jsons) {
        List<String> sorted = new ArrayList<>(jsons == null ? Set.of() : jsons);
        sorted.sort(Comparator.naturalOrder());
        List<Object> out = new ArrayList<>();
        sorted.forEach(j -> out.add(JSON.parse(j)));
        return out;
    }

    /** createAcl / updateAcl: the page's PolicyRequest, split into one request per resource and broker. */
    private Object putAcl(JSONObject a, boolean create) throws Exception {
        String subject = a.getString("subject");
        JSONArray policies = a.getJSONArray("policies");
        if (policies == null || policies.isEmpty()) {
            return DashboardDriver.map("brokerAddrs", List.of(), "requests", 0);
        }
        if (subject == null || subject.isEmpty()) {
            throw new IllegalArgumentException("Subject cannot be null or empty.");
        }
        List<String> addrs = brokerAddrs(a.getString("clusterName"), a.getString("brokerName"));
        int requests = 0;
        for (int i = 0; i < policies.size(); i++) {
            JSONObject policy = policies.getJSONObject(i);
            JSONArray entries = policy.getJSONArray("entries");
            for (int j = 0; entries != null && j < entries.size(); j++) {
                JSONObject entry = entries.getJSONObject(j);
                for (String resource : DashboardDriver.strings(entry, "resource")) {
                    AclInfo.PolicyEntryInfo e = new AclInfo.PolicyEntryInfo();
                    e.setActions(DashboardDriver.strings(entry, "actions"));
                    e.setDecision(entry.getString("decision"));
                    e.setResource(resource);
                    e.setSourceIps(entry.containsKey("sourceIps") ? DashboardDriver.strings(entry, "sourceIps") : null);
                    AclInfo.PolicyInfo p = new AclInfo.PolicyInfo();
                    p.setEntries(new ArrayList<>(List.of(e)));
                    p.setPolicyType(policy.getString("policyType"));
                    AclInfo info = new AclInfo();
                    info.setPolicies(new ArrayList<>(List.of(p)));
                    info.setSubject(subject);
                    for (String addr : addrs) {
                        if (create) {
                            admin.createAcl(addr, info);
                        } else {
                            admin.updateAcl(addr, info);
                        }
                        requests++;
                    }
                }
            }
        }
        return DashboardDriver.map("brokerAddrs", addrs, "requests", requests);
    }
}
