// rtnetlink requests as sent, built without a socket or root (netlink/batch.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <cstring>

#include "netlink/batch.h"

namespace rocelab::netlink {
namespace {

// The VXLAN port goes as the kernel's be16 (libnl 3.7 writes 32 bits: the kernel logged
// "attribute type 15 has an invalid length" for every cut link, issue 48), and the request
// still parses whole: every length around the attribute kept.
TEST(NetlinkRequests, AVxlanLinksPortIsABe16AndTheRequestParsesWhole) {
  VxlanSpec v;
  v.name = "vx0";
  v.vni = 7;
  v.local = 0xC612FE00;   // 198.18.254.0
  v.remote = 0xC612FE01;
  v.port = 4789;
  v.mtu = 4250;
  int e = 0;
  nl_msg* msg = vxlan_request(v, e);
  ASSERT_NE(msg, nullptr) << e;
  nlmsghdr* h = nlmsg_hdr(msg);
  nlattr* info = nlmsg_find_attr(h, sizeof(ifinfomsg), IFLA_LINKINFO);
  ASSERT_NE(info, nullptr);
  nlattr* data = nla_find(static_cast<nlattr*>(nla_data(info)), nla_len(info), IFLA_INFO_DATA);
  ASSERT_NE(data, nullptr);
  nlattr* tb[IFLA_VXLAN_MAX + 1] = {};
  ASSERT_EQ(nla_parse_nested(tb, IFLA_VXLAN_MAX, data, nullptr), 0);
  ASSERT_NE(tb[IFLA_VXLAN_PORT], nullptr);
  EXPECT_EQ(nla_len(tb[IFLA_VXLAN_PORT]), 2);
  uint16_t be = 0;
  std::memcpy(&be, nla_data(tb[IFLA_VXLAN_PORT]), 2);
  EXPECT_EQ(ntohs(be), 4789);
  // What follows the port is still found: its aligned size did not change.
  ASSERT_NE(tb[IFLA_VXLAN_ID], nullptr);
  EXPECT_EQ(nla_get_u32(tb[IFLA_VXLAN_ID]), 7u);
  ASSERT_NE(tb[IFLA_VXLAN_LEARNING], nullptr);
  EXPECT_EQ(nla_get_u8(tb[IFLA_VXLAN_LEARNING]), 0);
  EXPECT_FALSE(vxlan_port_as_be16(msg, 4789)) << "already a be16: nothing more to fix";
  nlmsg_free(msg);
}

}  // namespace
}  // namespace rocelab::netlink
