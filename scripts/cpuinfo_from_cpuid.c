#include <stdio.h>
#include <string.h>
#include <cpuid.h>
struct f { unsigned leaf, sub; int reg; int bit; const char *name; };
/* reg: 0 eax 1 ebx 2 ecx 3 edx; Linux /proc/cpuinfo names */
static const struct f F[] = {
 {1,0,3,0,"fpu"},{1,0,3,4,"tsc"},{1,0,3,8,"cx8"},{1,0,3,15,"cmov"},{1,0,3,19,"clflush"},
 {1,0,3,23,"mmx"},{1,0,3,24,"fxsr"},{1,0,3,25,"sse"},{1,0,3,26,"sse2"},
 {1,0,2,0,"pni"},{1,0,2,1,"pclmulqdq"},{1,0,2,9,"ssse3"},{1,0,2,12,"fma"},{1,0,2,13,"cx16"},
 {1,0,2,19,"sse4_1"},{1,0,2,20,"sse4_2"},{1,0,2,22,"movbe"},{1,0,2,23,"popcnt"},
 {1,0,2,25,"aes"},{1,0,2,26,"xsave"},{1,0,2,28,"avx"},{1,0,2,29,"f16c"},{1,0,2,30,"rdrand"},
 {1,0,2,31,"hypervisor"},
 {7,0,1,3,"bmi1"},{7,0,1,5,"avx2"},{7,0,1,8,"bmi2"},{7,0,1,9,"erms"},{7,0,1,16,"avx512f"},
 {7,0,1,17,"avx512dq"},{7,0,1,19,"adx"},{7,0,1,29,"sha_ni"},{7,0,1,30,"avx512bw"},{7,0,1,31,"avx512vl"},
 {7,0,2,11,"avx512_vnni"},{7,0,3,24,"amx_tile"},{7,0,3,25,"amx_int8"},{7,1,0,4,"avx_vnni"},
 {0x80000001,0,2,0,"lahf_lm"},{0x80000001,0,2,5,"abm"},{0x80000001,0,3,11,"syscall"},
 {0x80000001,0,3,20,"nx"},{0x80000001,0,3,27,"rdtscp"},{0x80000001,0,3,29,"lm"},
};
int main(void){
  unsigned r[4]; char brand[49]={0};
  for (unsigned i=0;i<3;i++){ __cpuid(0x80000002+i,r[0],r[1],r[2],r[3]); memcpy(brand+16*i,r,16);} 
  char vendor[13]={0}; __cpuid(0,r[0],r[1],r[2],r[3]); memcpy(vendor,&r[1],4);memcpy(vendor+4,&r[3],4);memcpy(vendor+8,&r[2],4);
  char *b=brand; while(*b==' ') b++;
  printf("processor\t: 0\nvendor_id\t: %s\nmodel name\t: %s\nflags\t\t:", vendor, b);
  for (unsigned i=0;i<sizeof F/sizeof F[0];i++){ __cpuid_count(F[i].leaf,F[i].sub,r[0],r[1],r[2],r[3]); if (r[F[i].reg]>>F[i].bit&1) printf(" %s",F[i].name);} 
  printf("\n");
}
