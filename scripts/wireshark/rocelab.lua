-- rocelab.lua: a Wireshark post-dissector for rocelab captures (capture-NODE-PORT.pcap).
-- Names what Wireshark 4.0 leaves unnamed on a RoCE fabric:
--   * the RoCEv2 CNP (BTH opcode 0x81, "Unknown opcode 129" without this script);
--   * the BTH's FECN and BECN bits (byte 4 of the BTH, no field in 4.0);
--   * DSCP and ECN of every RoCEv2 packet in the Info column;
--   * 802.1Qbb PFC (MAC Control CBFC) as "PFC XOFF p3 65535 quanta" / "PFC XON p3".
-- Use: wireshark -X lua_script:scripts/wireshark/rocelab.lua capture-sw-host8.pcap
--      tshark -X lua_script:scripts/wireshark/rocelab.lua -r FILE -Y rocelab.cnp
-- or copy it into ~/.local/lib/wireshark/plugins/.

local proto = Proto("rocelab", "rocelab RoCEv2 and PFC annotations")

local ecn_names = { [0] = "Not-ECT", [1] = "ECT(1)", [2] = "ECT(0)", [3] = "CE" }

local f_cnp = ProtoField.bool("rocelab.cnp", "RoCEv2 CNP (congestion notification)")
local f_fecn = ProtoField.bool("rocelab.fecn", "FECN")
local f_becn = ProtoField.bool("rocelab.becn", "BECN")
local f_dscp = ProtoField.uint8("rocelab.dscp", "DSCP")
local f_ecn = ProtoField.string("rocelab.ecn", "ECN")
local f_pfc = ProtoField.string("rocelab.pfc", "PFC")
local f_pfc_xoff = ProtoField.uint8("rocelab.pfc.xoff", "PFC priorities paused (XOFF)", base.HEX)
local f_pfc_xon = ProtoField.uint8("rocelab.pfc.xon", "PFC priorities resumed (XON)", base.HEX)
proto.fields = { f_cnp, f_fecn, f_becn, f_dscp, f_ecn, f_pfc, f_pfc_xoff, f_pfc_xon }

local bth_opcode = Field.new("infiniband.bth.opcode")
local bth_destqp = Field.new("infiniband.bth.destqp")
local ip_dscp = Field.new("ip.dsfield.dscp")
local ip_ecn = Field.new("ip.dsfield.ecn")
local cbfc_enbv = Field.new("macc.cbfc.enbv")
local cbfc_time = {}
for i = 0, 7 do cbfc_time[i] = Field.new("macc.cbfc.pause_time.c" .. i) end

local function pfc(tree, pinfo)
  local enbv = cbfc_enbv()
  if not enbv then return end
  local v = enbv.value
  local parts, xoff, xon = {}, 0, 0
  for i = 0, 7 do
    if bit32.band(v, bit32.lshift(1, i)) ~= 0 then
      local t = cbfc_time[i]()
      local q = t and t.value or 0
      if q == 0 then
        xon = bit32.bor(xon, bit32.lshift(1, i))
        parts[#parts + 1] = "XON p" .. i
      else
        xoff = bit32.bor(xoff, bit32.lshift(1, i))
        parts[#parts + 1] = "XOFF p" .. i .. " " .. q .. " quanta"
      end
    end
  end
  local text = #parts > 0 and ("PFC " .. table.concat(parts, ", ")) or "PFC (no priority named)"
  local sub = tree:add(proto, text)
  sub:add(f_pfc, text)
  sub:add(f_pfc_xoff, xoff)
  sub:add(f_pfc_xon, xon)
  pinfo.cols.info = text
end

local function roce(tvb, tree, pinfo)
  local op = bth_opcode()
  if not op then return end
  local sub = tree:add(proto, "rocelab")
  local notes = {}
  local d, e = ip_dscp(), ip_ecn()
  if d then
    sub:add(f_dscp, d.value)
    notes[#notes + 1] = "DSCP " .. d.value
  end
  if e then
    sub:add(f_ecn, ecn_names[e.value] or tostring(e.value))
    notes[#notes + 1] = "ECN " .. (ecn_names[e.value] or tostring(e.value))
  end
  -- BTH byte 4: FECN (bit 7) and BECN (bit 6), then 6 reserved bits.
  local fb_at = op.offset + 4
  if fb_at < tvb:len() then
    local fb = tvb(fb_at, 1):uint()
    local fecn, becn = bit32.band(fb, 0x80) ~= 0, bit32.band(fb, 0x40) ~= 0
    sub:add(f_fecn, tvb(fb_at, 1), fecn)
    sub:add(f_becn, tvb(fb_at, 1), becn)
    if fecn then notes[#notes + 1] = "FECN" end
    if becn then notes[#notes + 1] = "BECN" end
  end
  local summary = " [" .. table.concat(notes, ", ") .. "]"
  if op.value == 0x81 then
    sub:add(f_cnp, true)
    local qp = bth_destqp()
    pinfo.cols.info = string.format("RoCEv2 CNP to QP 0x%06x%s", qp and qp.value or 0, summary)
  else
    pinfo.cols.info:append(summary)
  end
end

function proto.dissector(tvb, pinfo, tree)
  pfc(tree, pinfo)
  roce(tvb, tree, pinfo)
end

register_postdissector(proto)
